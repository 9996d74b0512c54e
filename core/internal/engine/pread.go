package engine

import (
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// preadPool performs spans with blocking pread calls: the calling goroutine plus helper
// goroutines, one blocked OS thread per read in flight. helpers is a process-wide
// budget shared by all callers, so many concurrent callers cannot pile up thousands of
// blocked threads; a caller that finds the budget spent works alone.
type preadPool struct {
	helpers chan struct{}
}

func newPreadPool(depth int) *preadPool {
	return &preadPool{helpers: make(chan struct{}, depth)}
}

func (p *preadPool) close() error { return nil }

func (p *preadPool) readSpans(spans []readSpan) error {
	var (
		next    atomic.Int64
		failed  atomic.Bool
		errOnce sync.Once
		first   error
		wg      sync.WaitGroup
	)
	work := func() {
		for !failed.Load() {
			i := next.Add(1) - 1
			if i >= int64(len(spans)) {
				return
			}
			if err := preadSpan(&spans[i]); err != nil {
				errOnce.Do(func() { first = err })
				failed.Store(true)
			}
		}
	}
spawn:
	for h := 1; h < len(spans); h++ {
		select {
		case p.helpers <- struct{}{}:
			wg.Add(1)
			go func() {
				defer func() { <-p.helpers; wg.Done() }()
				work()
			}()
		default:
			break spawn
		}
	}
	work()
	wg.Wait()
	return first
}

// ReadFull fills buf from offset off of the file open as fd with blocking pread calls on
// the calling goroutine: for a single read, where a queue would only add a hand-off. A
// file that ends first gives an error wrapping io.ErrUnexpectedEOF.
func ReadFull(fd int, buf []byte, off int64) error {
	return preadSpan(&readSpan{fd: fd, off: off, buf: buf, need: len(buf), align: 1})
}

func preadSpan(s *readSpan) error {
	for {
		off, b := s.next()
		n, err := unix.Pread(s.fd, b, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("pread %d bytes at offset %d: %w", len(b), off, err)
		}
		if complete, err := s.advance(n); complete || err != nil {
			return err
		}
	}
}
