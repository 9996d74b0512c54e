package engine

import (
	"fmt"
	"io"
)

// MaxChunk caps one read or copy system call (pread, copy_file_range) or ring entry:
// io_uring and AIO lengths are 32-bit and Linux transfers at most 0x7ffff000 bytes per
// call, so bigger transfers go in several calls. A variable so that tests can shrink it.
var MaxChunk = 1 << 30

// readSpan is one read as the low-level engines see it. It is complete once buf is full, or
// once need bytes have arrived and the file has ended (an O_DIRECT read rounded out past
// the end of file legitimately comes back short).
type readSpan struct {
	fd    int
	off   int64
	buf   []byte
	need  int
	align int64 // a short read ending off this boundary can only be end of file (O_DIRECT)
	done  int   // bytes already read
	chunk int   // length of the read in flight
}

// bufferedSpans turns requests on ordinary fds into spans, leaving out empty ones.
func bufferedSpans(reqs []Request) []readSpan {
	spans := make([]readSpan, 0, len(reqs))
	for _, r := range reqs {
		if len(r.Buf) > 0 {
			spans = append(spans, readSpan{fd: r.FD, off: r.Off, buf: r.Buf, need: len(r.Buf), align: 1})
		}
	}
	return spans
}

// next returns the file offset and buffer of the next read of s and notes its length.
func (s *readSpan) next() (int64, []byte) {
	b := s.buf[s.done:]
	if len(b) > MaxChunk {
		b = b[:MaxChunk]
	}
	s.chunk = len(b)
	return s.off + int64(s.done), b
}

// advance records that the read issued by next returned n bytes. It reports whether s
// is complete; an error means the file ended before need bytes.
func (s *readSpan) advance(n int) (bool, error) {
	s.done += n
	switch {
	case s.done == len(s.buf):
		return true, nil
	case n == s.chunk:
		return false, nil // a chunk of a larger span: go on
	case n > 0 && (s.off+int64(s.done))%s.align == 0 && s.done < s.need:
		return false, nil // short but on a boundary: may be an interrupted read, retry
	case s.done >= s.need:
		return true, nil
	}
	return false, fmt.Errorf("read of %d bytes at offset %d: file ends after %d: %w",
		s.need, s.off, s.done, io.ErrUnexpectedEOF)
}

// spanReader performs spans with many reads in flight; safe for concurrent use.
type spanReader interface {
	readSpans(spans []readSpan) error
	close() error
}

// batchEngine implements Engine on top of one reader for ordinary fds and one for
// O_DIRECT fds (Linux AIO is only asynchronous on the latter).
type batchEngine struct {
	kind     string
	buffered spanReader
	direct   spanReader
}

func (e *batchEngine) Name() string { return e.kind }

func (e *batchEngine) Read(reqs []Request, direct bool) error {
	if direct {
		return readDirect(e.direct, reqs)
	}
	spans, err := readCached(bufferedSpans(reqs))
	if err != nil || len(spans) == 0 {
		return err
	}
	return e.buffered.readSpans(spans)
}

func (e *batchEngine) Close() error {
	err := e.buffered.close()
	if e.direct != e.buffered {
		if derr := e.direct.close(); err == nil {
			err = derr
		}
	}
	return err
}
