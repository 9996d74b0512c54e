package abi

import (
	"runtime"
	"testing"
	"unsafe"
)

// TestSetThreadsSetsAndReportsGOMAXPROCS: 0 only asks, a positive count sets it and the
// previous one comes back; a negative count or no output pointer is refused.
func TestSetThreadsSetsAndReportsGOMAXPROCS(t *testing.T) {
	start := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(start) })
	var previous int32
	must(t, func() int32 { return SetThreads(0, unsafe.Pointer(&previous)) })
	if int(previous) != start || runtime.GOMAXPROCS(0) != start {
		t.Fatalf("asking: got %d, GOMAXPROCS now %d, want %d unchanged", previous, runtime.GOMAXPROCS(0), start)
	}
	must(t, func() int32 { return SetThreads(1, unsafe.Pointer(&previous)) })
	if int(previous) != start || runtime.GOMAXPROCS(0) != 1 {
		t.Fatalf("setting 1: previous %d (want %d), GOMAXPROCS %d", previous, start, runtime.GOMAXPROCS(0))
	}
	if got := SetThreads(-1, unsafe.Pointer(&previous)); got != StatusInvalid {
		t.Fatalf("threads -1: status %d, want %d", got, StatusInvalid)
	}
	if got := SetThreads(2, nil); got != StatusInvalid || runtime.GOMAXPROCS(0) != 1 {
		t.Fatalf("no output pointer: status %d, GOMAXPROCS %d", got, runtime.GOMAXPROCS(0))
	}
}
