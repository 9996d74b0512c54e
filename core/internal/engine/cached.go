package engine

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// nowaitUnsupported is set once the kernel rejects preadv2(RWF_NOWAIT) outright.
var nowaitUnsupported atomic.Bool

// coldBatch is how many more page-cache misses than hits make readCached stop probing:
// the batch is cold, and each probe would only add a syscall before the engine's read.
const coldBatch = 16

// readCached performs on the calling thread the spans, or leading parts of spans, that
// the page cache already holds, using preadv2(RWF_NOWAIT), which fails with EAGAIN
// instead of waiting for the disk. It returns the spans still to do. A warm batch thus
// costs one plain syscall per read, with no queue or goroutine hand-off, and only cold
// reads pay for the engine. An end-of-file error is final; any other failure leaves the
// span to the engine, which reports it.
func readCached(spans []readSpan) ([]readSpan, error) {
	if nowaitUnsupported.Load() {
		return spans, nil
	}
	rest := spans[:0]
	misses := 0
	for i := range spans {
		s := &spans[i]
		for misses < coldBatch {
			off, b := s.next()
			n, err := preadNowait(s.fd, b, off)
			if err == unix.EINTR {
				continue
			}
			if err == unix.ENOSYS {
				nowaitUnsupported.Store(true)
			}
			if err != nil {
				misses++
				break
			}
			misses = max(misses-1, 0)
			complete, err := s.advance(n)
			if err != nil {
				return nil, err
			}
			if complete {
				s = nil
				break
			}
		}
		if s != nil {
			rest = append(rest, *s)
		}
	}
	return rest, nil
}

// preadNowait is preadv2(fd, {b}, off, RWF_NOWAIT) without unix.Preadv2's allocations,
// for 64-bit Linux where the whole offset goes in the low word.
func preadNowait(fd int, b []byte, off int64) (int, error) {
	iov := unix.Iovec{Base: unsafe.SliceData(b)}
	iov.SetLen(len(b))
	n, _, errno := unix.Syscall6(unix.SYS_PREADV2, uintptr(fd), uintptr(unsafe.Pointer(&iov)), 1,
		uintptr(off), 0, unix.RWF_NOWAIT)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}
