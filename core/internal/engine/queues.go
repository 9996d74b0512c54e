package engine

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// queue is one kernel submission queue (an io_uring ring or an AIO context) driven by
// one goroutine at a time.
type queue interface {
	run(spans []readSpan) error
	close() error
}

// queuePool shares up to limit queues, created on demand, between concurrent callers:
// each call drives a queue of its own, so callers never see each other's completions,
// and small batches from many threads still run side by side.
type queuePool struct {
	create func() (queue, error)
	free   chan queue
	mu     sync.Mutex
	made   int
}

func newQueuePool(limit int, create func() (queue, error)) (*queuePool, error) {
	p := &queuePool{create: create, free: make(chan queue, limit)}
	q, err := p.get() // probe: fail now, while another engine can still be chosen
	if err != nil {
		return nil, err
	}
	p.free <- q
	return p, nil
}

func (p *queuePool) get() (queue, error) {
	select {
	case q := <-p.free:
		return q, nil
	default:
	}
	p.mu.Lock()
	if p.made < cap(p.free) {
		p.made++
		p.mu.Unlock()
		q, err := p.create()
		if err != nil {
			p.mu.Lock()
			p.made--
			p.mu.Unlock()
		}
		return q, err
	}
	p.mu.Unlock()
	return <-p.free, nil
}

func (p *queuePool) readSpans(spans []readSpan) error {
	if len(spans) == 0 {
		return nil
	}
	q, err := p.get()
	if err != nil {
		return err
	}
	defer func() { p.free <- q }()
	return q.run(spans)
}

// close waits for every queue to come back and releases it.
func (p *queuePool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first error
	for ; p.made > 0; p.made-- {
		if err := (<-p.free).close(); first == nil {
			first = err
		}
	}
	return first
}

// spanQueue is the bookkeeping of one run on a kernel queue: the spans that still need a
// read (a span goes back in after each partial read) and the first error.
type spanQueue struct {
	spans []readSpan
	todo  []int32 // popped from the end
	err   error
}

func newSpanQueue(spans []readSpan) *spanQueue {
	q := &spanQueue{spans: spans, todo: make([]int32, len(spans))}
	for i := range q.todo {
		q.todo[i] = int32(len(spans) - 1 - i) // first span first
	}
	return q
}

// more reports whether reads remain to be issued; after an error none are.
func (q *spanQueue) more() bool { return q.err == nil && len(q.todo) > 0 }

// pop returns the next read to issue: the span's index, file offset and buffer.
func (q *spanQueue) pop() (i int32, fd int, off int64, b []byte) {
	i = q.todo[len(q.todo)-1]
	q.todo = q.todo[:len(q.todo)-1]
	off, b = q.spans[i].next()
	return i, q.spans[i].fd, off, b
}

// unpop puts back a read that the kernel did not take.
func (q *spanQueue) unpop(i int32) { q.todo = append(q.todo, i) }

// fail records err (an errno) for the read of span i, unless an error came first.
func (q *spanQueue) fail(i int32, op string, err error) {
	if q.err == nil {
		s := &q.spans[i]
		q.err = fmt.Errorf("%s read %d bytes at offset %d: %w", op, s.chunk, s.off+int64(s.done), err)
	}
}

// complete records the result of a read of span i: bytes read, or a negated errno.
func (q *spanQueue) complete(i int32, op string, res int64) {
	if res < 0 {
		q.fail(i, op, unix.Errno(-res))
		return
	}
	done, err := q.spans[i].advance(int(res))
	switch {
	case err != nil && q.err == nil:
		q.err = err
	case err == nil && !done:
		q.todo = append(q.todo, i)
	}
}
