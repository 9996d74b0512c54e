package abi

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"unsafe"
)

func TestErrmsgCopiesAndKeeps(t *testing.T) {
	onThread(func() struct{} {
		const msg = "ffr_reader_len: 24690 is not a reader handle"
		var needed uintptr
		var n uint64
		if st := ReaderLen(12345<<1, unsafe.Pointer(&n)); st != StatusHandle {
			t.Fatalf("status %d, want %d", st, StatusHandle)
		}
		// A probe with no buffer gives the length.
		if st := Errmsg(nil, 0, unsafe.Pointer(&needed)); st != StatusShortBuf || needed != uintptr(len(msg)) {
			t.Errorf("probe: status %d, length %d, want %d and %d", st, needed, StatusShortBuf, len(msg))
		}
		small := []byte("XXXXXXXX")
		if st := Errmsg(ptr(small), 6, unsafe.Pointer(&needed)); st != StatusShortBuf || needed != uintptr(len(msg)) {
			t.Errorf("short copy: status %d, length %d", st, needed)
		}
		if want := "ffr_r\x00XX"; string(small) != want {
			t.Errorf("truncated copy %q, want %q", small, want)
		}
		if st := Errmsg(nil, 0, nil); st != StatusInvalid {
			t.Errorf("needed NULL: status %d, want %d", st, StatusInvalid)
		}
		// Reading it, or asking wrongly, leaves the record as it was.
		for range 2 {
			if got := takeErrmsg(); got != msg {
				t.Errorf("message %q, want %q", got, msg)
			}
		}
		return struct{}{}
	})
}

func TestErrmsgWithoutFailure(t *testing.T) {
	onThread(func() struct{} {
		lastFailures.record(&lastFailure{tid: tid()}) // whatever an earlier test left here
		needed := uintptr(99)
		buf := []byte("Z")
		if st := Errmsg(ptr(buf), 1, unsafe.Pointer(&needed)); st != StatusOK || needed != 0 || buf[0] != 0 {
			t.Errorf("no failure: status %d, length %d, buffer %q; want OK, 0 and a lone NUL", st, needed, buf)
		}
		return struct{}{}
	})
}

func TestSuccessKeepsLastError(t *testing.T) {
	noLeaks(t)
	msg := onThread(func() string {
		var n uint64
		ReaderLen(-1, unsafe.Pointer(&n))
		OpenHandles(unsafe.Pointer(&n))
		return takeErrmsg()
	})
	if msg == "" {
		t.Fatal("a successful call cleared the previous failure's message")
	}
}

// TestErrorsArePerThread fails on many OS threads at once, each with its own handle
// number, and checks every thread gets back its own message.
func TestErrorsArePerThread(t *testing.T) {
	const threads = 16
	start := make(chan struct{})
	var failed sync.WaitGroup
	var wg sync.WaitGroup
	failed.Add(threads)
	msgs := make([]string, threads)
	for i := range threads {
		wg.Go(func() {
			msgs[i] = onThread(func() string {
				<-start
				var n uint64
				ReaderLen(int64(1000+2*i), unsafe.Pointer(&n))
				failed.Done()
				failed.Wait() // every thread has failed before any reads its message
				return takeErrmsg()
			})
		})
	}
	close(start)
	wg.Wait()
	for i, msg := range msgs {
		if want := fmt.Sprintf("ffr_reader_len: %d is not a reader handle", 1000+2*i); msg != want {
			t.Errorf("thread %d: %q, want %q", i, msg, want)
		}
	}
}

// osError is what ffr_oserror reports on the calling thread.
func osError(t *testing.T) (int32, string) {
	t.Helper()
	var errno int32
	var needed uintptr
	OSError(unsafe.Pointer(&errno), nil, 0, unsafe.Pointer(&needed))
	buf := make([]byte, needed+1)
	if st := OSError(unsafe.Pointer(&errno), ptr(buf), uintptr(len(buf)), unsafe.Pointer(&needed)); st != StatusOK {
		t.Fatalf("ffr_oserror: status %d", st)
	}
	return errno, string(buf[:needed])
}

// TestOSErrorCarriesErrno makes real system calls fail and checks that the errno and the
// path come through, and that failures of other kinds report none.
func TestOSErrorCarriesErrno(t *testing.T) {
	noLeaks(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	under := filepath.Join(file, "x.ffr")
	missing := filepath.Join(t.TempDir(), "missing.ffr")
	var h int64
	open := func(path string) func() int32 {
		return func() int32 {
			paths := []unsafe.Pointer{cstr(path)}
			return ReaderOpen(ptr(paths), 1, 0, unsafe.Pointer(&h))
		}
	}
	tests := []struct {
		name   string
		call   func() int32
		status int32
		errno  syscall.Errno
		path   string
	}{
		{"not a directory", open(under), StatusIO, syscall.ENOTDIR, under},
		{"missing", open(missing), StatusNotFound, syscall.ENOENT, missing},
		{"writer in a file", func() int32 {
			return WriterCreate(cstr(under), 1, CompressNone, unsafe.Pointer(&h))
		}, StatusIO, syscall.ENOTDIR, ""},
		{"bad handle", func() int32 { var n uint64; return ReaderLen(-1, unsafe.Pointer(&n)) }, StatusHandle, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			onThread(func() struct{} {
				if st := tt.call(); st != tt.status {
					t.Errorf("status %d, want %d", st, tt.status)
				}
				errno, path := osError(t)
				if syscall.Errno(errno) != tt.errno {
					t.Errorf("errno %d (%v), want %d (%v)", errno, syscall.Errno(errno), tt.errno, tt.errno)
				}
				if tt.path != "" && path != tt.path {
					t.Errorf("path %q, want %q", path, tt.path)
				}
				if tt.errno == 0 && path != "" {
					t.Errorf("path %q for a failure that is not an OS error", path)
				}
				return struct{}{}
			})
		})
	}
}

// tid is the calling OS thread's id, as the failure records know it.
func tid() int { return syscall.Gettid() }

// TestFailureTableIsBounded: the records of threads that fail and never ask stay within the
// capacity, the least recently failed dropped first.
func TestFailureTableIsBounded(t *testing.T) {
	table := newFailureTable(4)
	for id := 1; id <= 10; id++ {
		table.record(&lastFailure{tid: id, msg: fmt.Sprint(id)})
	}
	table.record(&lastFailure{tid: 7, msg: "7 again"}) // 7 becomes the most recent
	table.record(&lastFailure{tid: 11, msg: "11"})
	table.record(&lastFailure{tid: 12, msg: "12"})
	if n := table.len(); n != 4 {
		t.Fatalf("%d records, want 4", n)
	}
	for id, want := range map[int]string{1: "", 8: "", 9: "", 10: "10", 7: "7 again", 11: "11", 12: "12"} {
		if got := table.lookup(id).msg; got != want {
			t.Errorf("thread %d: %q, want %q", id, got, want)
		}
	}
}

// TestFailuresOfDeadThreadsAreDropped fails once on each of more OS threads than the
// library keeps records for, each thread exiting without asking for its message.
func TestFailuresOfDeadThreadsAreDropped(t *testing.T) {
	for range failureThreads + 100 {
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
			var n uint64
			ReaderLen(-1, unsafe.Pointer(&n))
			close(done)
		}()
		<-done
	}
	if n := lastFailures.len(); n > failureThreads {
		t.Errorf("%d failure records kept, at most %d expected", n, failureThreads)
	}
}
