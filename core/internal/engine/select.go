package engine

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// Env forces one engine ("io_uring", "aio" or "pread"); tests use it to run each.
const Env = "FFRECORD_ENGINE"

// ErrUnknown is the error of New (and of Default, through $FFRECORD_ENGINE) for a kind
// that names no engine.
var ErrUnknown = errors.New("unknown I/O engine")

// depth is the number of reads each ring, AIO context or pread budget keeps in flight.
const depth = 64

var (
	defaultOnce sync.Once
	defaultEng  Engine
	defaultErr  error
)

// Default returns the process-wide engine, created at first use: the one named by
// $FFRECORD_ENGINE, else the first of io_uring, Linux AIO and the pread pool that the
// kernel (and any seccomp profile) lets us use.
func Default() (Engine, error) {
	defaultOnce.Do(func() {
		defaultEng, defaultErr = New(os.Getenv(Env))
	})
	return defaultEng, defaultErr
}

// New creates the engine called kind, or the best available one when kind is "".
func New(kind string) (Engine, error) {
	switch kind {
	case "":
		if e, err := New("io_uring"); err == nil {
			return e, nil
		}
		if e, err := New("aio"); err == nil {
			return e, nil
		}
		return New("pread")
	case "io_uring":
		return newUringEngine()
	case "aio":
		return newAIOEngine()
	case "pread":
		pool := newPreadPool(depth)
		return &batchEngine{kind: kind, buffered: pool, direct: pool}, nil
	}
	return nil, fmt.Errorf("%w: %s=%q: want io_uring, aio or pread", ErrUnknown, Env, kind)
}
