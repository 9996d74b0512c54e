package abi

import (
	"math/rand/v2"
	"sync"
	"testing"
	"unsafe"
)

// TestConcurrentUse reads one shared reader from many OS threads while other threads open
// and close readers of their own, then closes the shared reader under the readers' feet:
// every call must either succeed with the right bytes or report the handle closed.
func TestConcurrentUse(t *testing.T) {
	noLeaks(t)
	m := loadManifest(t)
	want := m.Files["basic.ffr"].Samples
	shared, r := tryOpen(FlagCheckData, golden("basic.ffr"))
	if r.status != StatusOK {
		t.Fatal(r.msg)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			indices := make([]uint64, 8)
			sizes := make([]uint64, 8)
			dst := make([]byte, 8*70000)
			for closed := false; !closed; {
				for k := range indices {
					indices[k] = rng.Uint64N(25)
				}
				r := call(func() int32 {
					return ReaderReadBatch(shared, ptr(indices), 8, ptr(dst), uint64(len(dst)), ptr(sizes))
				})
				switch r.status {
				case StatusOK:
					off := uint64(0)
					for k, i := range indices {
						if got := sha(dst[off : off+sizes[k]]); got != want[i].Sha256 {
							t.Errorf("thread %d: sample %d has sha %s", g, i, got)
							return
						}
						off += sizes[k]
					}
				case StatusClosed:
					closed = true
				default:
					t.Errorf("thread %d: status %d: %s", g, r.status, r.msg)
					return
				}
			}
		})
	}
	for g := range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				h, r := tryOpen(uint32(g%2), golden("multi"))
				if r.status != StatusOK {
					t.Errorf("open: %d %s", r.status, r.msg)
					return
				}
				var n uint64
				if st := ReaderLen(h, unsafe.Pointer(&n)); st != StatusOK || n != 44 {
					t.Errorf("len: status %d, n %d", st, n)
				}
				if st := ReaderClose(h); st != StatusOK {
					t.Errorf("close: status %d", st)
				}
			}
		})
	}
	for range 200 {
		readBatch(t, shared, 3, 11) // the main goroutine reads too, while the others run
	}
	must(t, func() int32 { return ReaderClose(shared) })
	close(stop)
	wg.Wait()
}
