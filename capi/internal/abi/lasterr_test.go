package abi

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"
)

func TestErrmsgCopiesTruncatesAndClears(t *testing.T) {
	onThread(func() struct{} {
		const msg = "ffr_reader_len: 12345 is not a reader handle"
		if n := Errmsg(nil, 0); n != 0 {
			t.Errorf("fresh thread: length %d, want 0", n)
		}
		var n uint64
		if st := ReaderLen(12345<<1, unsafe.Pointer(&n)); st != StatusHandle {
			t.Fatalf("status %d, want %d", st, StatusHandle)
		}
		// A probe with no buffer gives the length and keeps the message.
		if got := Errmsg(nil, 0); got != int32(len(msg)) {
			t.Errorf("probe: length %d, want %d", got, len(msg))
		}
		small := []byte("XXXXXXXX")
		if got := Errmsg(ptr(small), 6); got != int32(len(msg)) {
			t.Errorf("length %d, want %d", got, len(msg))
		}
		if want := "ffr_r\x00XX"; string(small) != want {
			t.Errorf("truncated copy %q, want %q", small, want)
		}
		if got := Errmsg(nil, 0); got != 0 {
			t.Errorf("after a copy: length %d, want 0 (cleared)", got)
		}
		empty := []byte("Z")
		Errmsg(ptr(empty), 1)
		if empty[0] != 0 {
			t.Errorf("no message: buffer %q, want a lone NUL", empty)
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
