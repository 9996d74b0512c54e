package abi

import (
	"container/list"
	"errors"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lastFailure is what ffr_errmsg and ffr_oserror report about a thread's last failure.
type lastFailure struct {
	tid   int
	msg   string
	errno int32  // the errno of the operating-system error behind it, 0 when none
	path  string // the path that errno concerned, "" when unknown
}

// failureTable keeps the last failure of each OS thread. An exported call runs on the C
// thread that made it, so the thread id identifies the caller. A record stays until the
// thread fails again, so a caller may read it as often as it likes; to bound the table
// when threads fail and exit without reading, only the records of the capacity threads
// that failed most recently are kept (a thread reads its record right after its failure,
// long before that many other threads have failed).
type failureTable struct {
	mu       sync.Mutex
	capacity int
	order    *list.List            // of *lastFailure, least recently failed first
	byThread map[int]*list.Element // tid -> its element of order
}

// failureThreads is how many threads' last failures are kept.
const failureThreads = 1024

var lastFailures = newFailureTable(failureThreads)

func newFailureTable(capacity int) *failureTable {
	return &failureTable{capacity: capacity, order: list.New(), byThread: make(map[int]*list.Element)}
}

// record makes f its thread's last failure, dropping the oldest record when full.
func (t *failureTable) record(f *lastFailure) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byThread[f.tid]; ok {
		t.order.Remove(e)
	}
	t.byThread[f.tid] = t.order.PushBack(f)
	if t.order.Len() > t.capacity {
		oldest := t.order.Remove(t.order.Front()).(*lastFailure)
		delete(t.byThread, oldest.tid)
	}
}

// lookup returns the last failure of thread tid (the zero record when none is kept).
func (t *failureTable) lookup(tid int) lastFailure {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byThread[tid]; ok {
		return *e.Value.(*lastFailure)
	}
	return lastFailure{tid: tid}
}

func (t *failureTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.order.Len()
}

// fail records err as the calling thread's last failure and returns its status.
func fail(err error) int32 {
	errno, path := osErrorOf(err)
	lastFailures.record(&lastFailure{tid: unix.Gettid(), msg: err.Error(), errno: errno, path: path})
	return statusOf(err)
}

// failf is fail for errors detected by this layer.
func failf(status int32, msg string) int32 {
	return fail(&callError{status: status, msg: msg})
}

// osErrorOf finds the operating-system error inside err: its errno and the path it
// concerned, when err carries them.
func osErrorOf(err error) (errno int32, path string) {
	var no syscall.Errno
	if !errors.As(err, &no) {
		return 0, ""
	}
	var pathErr *fs.PathError
	var linkErr *os.LinkError
	switch {
	case errors.As(err, &pathErr):
		path = pathErr.Path
	case errors.As(err, &linkErr):
		path = linkErr.New
	}
	return int32(no), path
}

// Errmsg implements ffr_errmsg. Neither it nor OSError records a failure of its own: what
// they report stays in place for the next question.
func Errmsg(buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	if needed == nil {
		return StatusInvalid
	}
	return copyText(lastFailures.lookup(unix.Gettid()).msg, buf, size, needed)
}

// OSError implements ffr_oserror.
func OSError(errno unsafe.Pointer, buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	if errno == nil || needed == nil {
		return StatusInvalid
	}
	last := lastFailures.lookup(unix.Gettid())
	*(*int32)(errno) = last.errno
	return copyText(last.path, buf, size, needed)
}
