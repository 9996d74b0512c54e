package abi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// The tests call the entry points with Go memory standing in for the C caller's: the
// functions only read and write through the pointers during the call, as with C memory.

// cstr returns a NUL-terminated copy of s.
func cstr(s string) unsafe.Pointer {
	b := append([]byte(s), 0)
	return unsafe.Pointer(&b[0])
}

// ptr returns the address of the first element of s, or nil for an empty slice.
func ptr[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

// onThread runs f locked to one OS thread, as a C caller's thread is during a call and
// between a failing call and ffr_errmsg.
func onThread[T any](f func() T) T {
	done := make(chan T)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		done <- f()
	}()
	return <-done
}

// result is a status together with the message the call left for its thread.
type result struct {
	status int32
	msg    string
}

// call runs f and fetches the message of its failure on the same thread.
func call(f func() int32) result {
	return onThread(func() result {
		st := f()
		return result{st, takeErrmsg()}
	})
}

// takeErrmsg reads the calling thread's last error message.
func takeErrmsg() string {
	var n uintptr
	Errmsg(nil, 0, unsafe.Pointer(&n))
	buf := make([]byte, n+1)
	if st := Errmsg(ptr(buf), uintptr(len(buf)), unsafe.Pointer(&n)); st != StatusOK {
		panic(fmt.Sprintf("ffr_errmsg: status %d with a buffer of its length", st))
	}
	return string(buf[:n])
}

// must fails the test unless f succeeds.
func must(t testing.TB, f func() int32) {
	t.Helper()
	if r := call(f); r.status != StatusOK {
		t.Fatalf("status %d: %s", r.status, r.msg)
	}
}

// expect fails the test unless f fails with status and a message containing every
// fragment.
func expect(t testing.TB, status int32, f func() int32, fragments ...string) string {
	t.Helper()
	r := call(f)
	if r.status != status {
		t.Fatalf("status %d (%q), want %d", r.status, r.msg, status)
	}
	if r.msg == "" {
		t.Fatalf("status %d without a message", status)
	}
	for _, frag := range fragments {
		if !strings.Contains(r.msg, frag) {
			t.Fatalf("message %q does not mention %q", r.msg, frag)
		}
	}
	return r.msg
}

// openHandles returns ffr_open_handles.
func openHandles(t testing.TB) uint64 {
	t.Helper()
	var n uint64
	must(t, func() int32 { return OpenHandles(unsafe.Pointer(&n)) })
	return n
}

// noLeaks makes the test fail if it ends with more or fewer handles open than it began.
func noLeaks(t testing.TB) {
	t.Helper()
	start := openHandles(t)
	t.Cleanup(func() {
		if end := openHandles(t); end != start {
			t.Errorf("open handles: %d at start, %d at end", start, end)
		}
	})
}

// golden returns the path of a golden file in core/testdata, shared with the core's tests.
func golden(name string) string { return filepath.Join("..", "..", "..", "core", "testdata", name) }

// manifest lists, per golden file, the length and sha256 of each sample.
type manifest struct {
	Files map[string]struct {
		N       int
		Samples []struct {
			Len    int
			Sha256 string
		}
	}
}

func loadManifest(t testing.TB) manifest {
	t.Helper()
	raw, err := os.ReadFile(golden("MANIFEST.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// openReader opens paths through ReaderOpen and closes the handle at the end of the test.
func openReader(t testing.TB, flags uint32, paths ...string) int64 {
	t.Helper()
	h, r := tryOpen(flags, paths...)
	if r.status != StatusOK {
		t.Fatalf("open %v: status %d: %s", paths, r.status, r.msg)
	}
	t.Cleanup(func() { ReaderClose(h) })
	return h
}

// tryOpen calls ReaderOpen on paths.
func tryOpen(flags uint32, paths ...string) (int64, result) {
	ptrs := make([]unsafe.Pointer, len(paths))
	for i, p := range paths {
		ptrs[i] = cstr(p)
	}
	var h int64
	r := call(func() int32 { return ReaderOpen(ptr(ptrs), uint64(len(ptrs)), flags, unsafe.Pointer(&h)) })
	return h, r
}

// readBatch reads indices through ReaderReadBatch into a buffer sized with ReaderSizes.
func readBatch(t testing.TB, h int64, indices ...uint64) [][]byte {
	t.Helper()
	sizes := make([]uint64, len(indices))
	must(t, func() int32 { return ReaderSizes(h, ptr(indices), uint64(len(indices)), ptr(sizes)) })
	total := uint64(0)
	for _, s := range sizes {
		total += s
	}
	buf := make([]byte, total)
	got := make([]uint64, len(indices))
	must(t, func() int32 {
		return ReaderReadBatch(h, ptr(indices), uint64(len(indices)), ptr(buf), uint64(len(buf)), ptr(got))
	})
	samples := make([][]byte, len(indices))
	off := uint64(0)
	for k, s := range got {
		if s != sizes[k] {
			t.Fatalf("sample %d: read_batch size %d, sizes said %d", indices[k], s, sizes[k])
		}
		samples[k] = buf[off : off+s]
		off += s
	}
	return samples
}

// writeFile writes samples to path through the writer entry points.
func writeFile(t testing.TB, path string, n uint64, compression int32, samples [][]byte) {
	t.Helper()
	var h int64
	must(t, func() int32 { return WriterCreate(cstr(path), n, compression, unsafe.Pointer(&h)) })
	for _, s := range samples {
		must(t, func() int32 { return WriterWrite(h, ptr(s), uint64(len(s))) })
	}
	must(t, func() int32 { return WriterClose(h) })
}
