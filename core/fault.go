package core

import (
	"runtime/debug"
)

// withFaultGuard runs fn, which reads from file mappings, and turns a memory fault into an
// error instead of a crash. A mapped file that shrinks after it was opened (or whose
// pages the kernel cannot read) raises SIGBUS on access; SetPanicOnFault makes that a
// recoverable panic in this goroutine only. where names the file and sample being read
// when the fault hit (index -1 for none).
func withFaultGuard(where func() (path string, index int64), fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if p := recover(); p != nil {
			if _, isFault := p.(interface{ Addr() uintptr }); !isFault {
				panic(p)
			}
			path, index := where()
			err = errorf(path, index, ErrCorrupt,
				"mapped data could not be read (file truncated while open, or an I/O error): %v", p)
		}
	}()
	return fn()
}
