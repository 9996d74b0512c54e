package abi

import (
	"math"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lastErrors holds the last failure message of each OS thread. An exported call runs on
// the C thread that made it, so the thread id identifies the caller. Entries are removed
// when read; a thread that never asks keeps one string here.
var lastErrors = struct {
	sync.Mutex
	byThread map[int]string
}{byThread: make(map[int]string)}

// fail records err as the calling thread's last error and returns its status.
func fail(err error) int32 {
	tid := unix.Gettid()
	lastErrors.Lock()
	lastErrors.byThread[tid] = err.Error()
	lastErrors.Unlock()
	return statusOf(err)
}

// failf is fail for errors detected by this layer.
func failf(status int32, msg string) int32 {
	return fail(&callError{status: status, msg: msg})
}

// Errmsg implements ffr_errmsg. A call with len 0 only asks for the length and keeps the
// message, so a caller can size its buffer first.
func Errmsg(buf unsafe.Pointer, size uintptr) int32 {
	tid := unix.Gettid()
	lastErrors.Lock()
	msg := lastErrors.byThread[tid]
	if buf != nil && size > 0 {
		delete(lastErrors.byThread, tid)
	}
	lastErrors.Unlock()
	copyCString(buf, size, msg)
	return int32(min(len(msg), math.MaxInt32))
}
