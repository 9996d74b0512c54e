package core

import (
	"fmt"
	"os"
	"sync"
)

// engineEnv forces one engine ("io_uring", "aio" or "pread"); tests use it to run each.
const engineEnv = "FFRECORD_ENGINE"

// engineDepth is the number of reads each ring, AIO context or pread budget keeps in flight.
const engineDepth = 64

var (
	defaultOnce   sync.Once
	defaultEng    engine
	defaultEngErr error
)

// defaultEngine returns the process-wide engine, created at first use: the one named by
// $FFRECORD_ENGINE, else the first of io_uring, Linux AIO and the pread pool that the
// kernel (and any seccomp profile) lets us use.
func defaultEngine() (engine, error) {
	defaultOnce.Do(func() {
		defaultEng, defaultEngErr = newEngine(os.Getenv(engineEnv))
	})
	return defaultEng, defaultEngErr
}

// newEngine creates the engine called kind, or the best available one when kind is "".
func newEngine(kind string) (engine, error) {
	switch kind {
	case "":
		if e, err := newEngine("io_uring"); err == nil {
			return e, nil
		}
		if e, err := newEngine("aio"); err == nil {
			return e, nil
		}
		return newEngine("pread")
	case "io_uring":
		return newUringEngine()
	case "aio":
		return newAIOEngine()
	case "pread":
		pool := newPreadPool(engineDepth)
		return &batchEngine{kind: kind, buffered: pool, direct: pool}, nil
	}
	return nil, fmt.Errorf("%w: %s=%q: want io_uring, aio or pread", ErrInvalid, engineEnv, kind)
}
