package abi

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"github.com/ffrecord/ffrecord/core"
)

// warmFile writes n samples of size bytes and opens them both through the ABI and
// directly, so the two layers can be measured on the same data.
func warmFile(tb testing.TB, n, size int) (handle int64, direct *core.Reader) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "bench.ffr")
	sample := make([]byte, size)
	samples := make([][]byte, n)
	for i := range samples {
		samples[i] = sample
	}
	writeFile(tb, path, uint64(n), CompressNone, samples)
	handle, r := tryOpen(FlagCheckData, path)
	if r.status != StatusOK {
		tb.Fatal(r.msg)
	}
	tb.Cleanup(func() { ReaderClose(handle) })
	direct, err := core.Open([]string{path}, core.ReaderOptions{CheckData: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { direct.Close() })
	return handle, direct
}

func randomIndices(n, batch int) []uint64 {
	rng := rand.New(rand.NewPCG(1, 1))
	indices := make([]uint64, batch)
	for k := range indices {
		indices[k] = rng.Uint64N(uint64(n))
	}
	return indices
}

// TestReadPathAddsNoAllocation compares the allocations of a batch read through the ABI
// with the same read on the core directly.
func TestReadPathAddsNoAllocation(t *testing.T) {
	noLeaks(t)
	handle, direct := warmFile(t, 64, 1024)
	indices := randomIndices(64, 16)
	sizes := make([]uint64, len(indices))
	dst := make([]byte, 1024*len(indices))
	viaCore := testing.AllocsPerRun(200, func() {
		if err := direct.ReadBatch(indices, dst, sizes); err != nil {
			t.Fatal(err)
		}
	})
	viaABI := testing.AllocsPerRun(200, func() {
		if st := ReaderReadBatch(handle, ptr(indices), uint64(len(indices)), ptr(dst), uint64(len(dst)), ptr(sizes)); st != StatusOK {
			t.Fatal(st)
		}
	})
	if viaABI > viaCore {
		t.Errorf("a read allocates %.1f times through the ABI, %.1f times on the core", viaABI, viaCore)
	}
}

// BenchmarkReadBatch measures a warm batch read of 1 KiB samples through the ABI layer
// and on the core directly: the difference is the per-call cost of the ABI.
func BenchmarkReadBatch(b *testing.B) {
	const n, size = 4096, 1024
	handle, direct := warmFile(b, n, size)
	for _, batch := range []int{1, 16, 256} {
		indices := randomIndices(n, batch)
		sizes := make([]uint64, batch)
		dst := make([]byte, size*batch)
		b.Run(fmt.Sprintf("batch=%d/layer=core", batch), func(b *testing.B) {
			b.SetBytes(int64(size * batch))
			b.ReportAllocs()
			for b.Loop() {
				if err := direct.ReadBatch(indices, dst, sizes); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("batch=%d/layer=abi", batch), func(b *testing.B) {
			b.SetBytes(int64(size * batch))
			b.ReportAllocs()
			for b.Loop() {
				if st := ReaderReadBatch(handle, ptr(indices), uint64(batch), ptr(dst), uint64(len(dst)), ptr(sizes)); st != StatusOK {
					b.Fatal(st)
				}
			}
		})
	}
}

// BenchmarkCallOverhead measures the cheapest reader call: handle lookup, checks and the
// panic guard around a field read.
func BenchmarkCallOverhead(b *testing.B) {
	handle, _ := warmFile(b, 1, 1)
	var n uint64
	b.ReportAllocs()
	for b.Loop() {
		if st := ReaderLen(handle, unsafe.Pointer(&n)); st != StatusOK {
			b.Fatal(st)
		}
	}
}

// BenchmarkFailingCall measures a call that fails, recording its message for the thread.
func BenchmarkFailingCall(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer takeErrmsg()
	var n uint64
	b.ReportAllocs()
	for b.Loop() {
		if st := ReaderLen(0, unsafe.Pointer(&n)); st != StatusHandle {
			b.Fatal(st)
		}
	}
}
