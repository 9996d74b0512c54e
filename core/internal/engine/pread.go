package engine

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/ffrecord/ffrecord/core/internal/parallel"
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
	tryHelper := func() bool {
		select {
		case p.helpers <- struct{}{}:
			return true
		default:
			return false
		}
	}
	return parallel.Each(len(spans), tryHelper, func() { <-p.helpers },
		func(i int) error { return preadSpan(&spans[i]) })
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
