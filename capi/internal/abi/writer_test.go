package abi

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"unsafe"
)

// randomSamples returns n samples of random sizes up to maxLen (some empty), from seed.
func randomSamples(seed uint64, n, maxLen int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	samples := make([][]byte, n)
	for i := range samples {
		samples[i] = make([]byte, rng.IntN(maxLen+1))
		for j := range samples[i] {
			samples[i][j] = byte(rng.Uint32())
		}
	}
	return samples
}

// readAll reads every sample of the file at path back through the reader entry points.
func readAll(t *testing.T, path string) [][]byte {
	t.Helper()
	h := openReader(t, FlagCheckData, path)
	var n uint64
	must(t, func() int32 { return ReaderLen(h, unsafe.Pointer(&n)) })
	indices := make([]uint64, n)
	for i := range indices {
		indices[i] = uint64(i)
	}
	return readBatch(t, h, indices...)
}

func equalSamples(t *testing.T, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d samples, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("sample %d differs (%d bytes, want %d)", i, len(got[i]), len(want[i]))
		}
	}
}

func TestWriterRoundTrip(t *testing.T) {
	noLeaks(t)
	for _, tt := range []struct {
		name        string
		declared    func(n int) uint64
		compression int32
	}{
		{"count known", func(n int) uint64 { return uint64(n) }, CompressNone},
		{"count unknown", func(int) uint64 { return math.MaxUint64 }, CompressNone},
		{"lz4", func(n int) uint64 { return uint64(n) }, CompressLZ4},
		{"zstd", func(n int) uint64 { return uint64(n) }, CompressZstd},
		{"zstd count unknown", func(int) uint64 { return math.MaxUint64 }, CompressZstd},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.ffr")
			samples := randomSamples(7, 40, 5000)
			samples = append(samples, bytes.Repeat([]byte("compressible "), 1000))
			writeFile(t, path, tt.declared(len(samples)), tt.compression, samples)
			equalSamples(t, readAll(t, path), samples)
		})
	}
}

func TestWriterCountAndLimits(t *testing.T) {
	noLeaks(t)
	path := filepath.Join(t.TempDir(), "x.ffr")
	var h int64
	must(t, func() int32 { return WriterCreate(cstr(path), 2, CompressNone, unsafe.Pointer(&h)) })
	count := func() uint64 {
		var n uint64
		must(t, func() int32 { return WriterCount(h, unsafe.Pointer(&n)) })
		return n
	}
	if c := count(); c != 0 {
		t.Fatalf("count %d before any write", c)
	}
	must(t, func() int32 { return WriterWrite(h, nil, 0) }) // an empty sample needs no data
	must(t, func() int32 { return WriterWrite(h, cstr("ab"), 2) })
	if c := count(); c != 2 {
		t.Fatalf("count %d after two writes", c)
	}
	expect(t, StatusInvalid, func() int32 { return WriterWrite(h, cstr("c"), 1) }, "2")
	expect(t, StatusInvalid, func() int32 { return WriterCount(h, nil) }, "count is NULL")
	must(t, func() int32 { return WriterClose(h) })
	equalSamples(t, readAll(t, path), [][]byte{{}, []byte("ab")})
}

func TestWriterTooFewLeavesNothing(t *testing.T) {
	noLeaks(t)
	path := filepath.Join(t.TempDir(), "x.ffr")
	var h int64
	must(t, func() int32 { return WriterCreate(cstr(path), 3, CompressNone, unsafe.Pointer(&h)) })
	must(t, func() int32 { return WriterWrite(h, cstr("a"), 1) })
	expect(t, StatusInvalid, func() int32 { return WriterClose(h) }, "3")
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after a failed close: stat %s gave %v, want not exist", path, err)
	}
	must(t, func() int32 { return WriterClose(h) }) // the failure was reported once
	expect(t, StatusClosed, func() int32 { return WriterWrite(h, cstr("a"), 1) }, "closed")
}

func TestWriterAbort(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "x.ffr")
	var h int64
	must(t, func() int32 { return WriterCreate(cstr(path), 3, CompressNone, unsafe.Pointer(&h)) })
	must(t, func() int32 { return WriterWrite(h, cstr("abc"), 3) })
	must(t, func() int32 { return WriterAbort(h) })
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("abort left %v in the directory", left)
	}
	must(t, func() int32 { return WriterAbort(h) }) // closing again does nothing
	must(t, func() int32 { return WriterClose(h) })
	expect(t, StatusClosed, func() int32 { return WriterWrite(h, cstr("a"), 1) }, "closed")
}

// TestWriterDoesNotKeepCallerBuffer overwrites the caller's buffer after each write: the
// file must hold what the buffer held during each call.
func TestWriterDoesNotKeepCallerBuffer(t *testing.T) {
	noLeaks(t)
	for _, compression := range []int32{CompressNone, CompressLZ4} {
		path := filepath.Join(t.TempDir(), "x.ffr")
		samples := randomSamples(3, 30, 3000)
		samples = append(samples, make([]byte, 1<<20)) // larger than any write buffer
		var h int64
		must(t, func() int32 { return WriterCreate(cstr(path), uint64(len(samples)), compression, unsafe.Pointer(&h)) })
		buf := make([]byte, 1<<20)
		for _, s := range samples {
			copy(buf, s)
			must(t, func() int32 { return WriterWrite(h, ptr(buf), uint64(len(s))) })
			for j := range buf {
				buf[j] = 0xA5
			}
		}
		must(t, func() int32 { return WriterClose(h) })
		equalSamples(t, readAll(t, path), samples)
	}
}

func TestWriterBadArguments(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	path := cstr(filepath.Join(dir, "x.ffr"))
	var h int64
	expect(t, StatusInvalid, func() int32 { return WriterCreate(nil, 1, CompressNone, unsafe.Pointer(&h)) }, "path is NULL")
	expect(t, StatusInvalid, func() int32 { return WriterCreate(path, 1, CompressNone, nil) }, "handle is NULL")
	expect(t, StatusInvalid, func() int32 { return WriterCreate(path, 1, 7, unsafe.Pointer(&h)) }, "compression 7")
	expect(t, StatusNotFound, func() int32 {
		return WriterCreate(cstr(filepath.Join(dir, "missing", "x.ffr")), 1, CompressNone, unsafe.Pointer(&h))
	}, "missing")
	must(t, func() int32 { return WriterCreate(path, 1, CompressNone, unsafe.Pointer(&h)) })
	defer WriterAbort(h)
	expect(t, StatusInvalid, func() int32 { return WriterWrite(h, nil, 5) }, "data is NULL")
}

func TestWriterBadHandles(t *testing.T) {
	noLeaks(t)
	reader := openReader(t, 0, golden("basic.ffr"))
	var n uint64
	for _, h := range []int64{0, -3, reader, 1 << 50} {
		expect(t, StatusHandle, func() int32 { return WriterWrite(h, cstr("a"), 1) }, "not a writer handle")
		expect(t, StatusHandle, func() int32 { return WriterWriteBatch(h, nil, nil, 0) }, "not a writer handle")
		expect(t, StatusHandle, func() int32 { return WriterCount(h, unsafe.Pointer(&n)) }, "not a writer handle")
		expect(t, StatusHandle, func() int32 { return WriterClose(h) }, "not a writer handle")
		expect(t, StatusHandle, func() int32 { return WriterAbort(h) }, "not a writer handle")
	}
	var h int64
	must(t, func() int32 {
		return WriterCreate(cstr(filepath.Join(t.TempDir(), "x.ffr")), 0, CompressNone, unsafe.Pointer(&h))
	})
	must(t, func() int32 { return WriterClose(h) })
	expect(t, StatusClosed, func() int32 { return WriterWrite(h, cstr("a"), 1) }, "closed")
	expect(t, StatusClosed, func() int32 { return WriterWriteBatch(h, nil, nil, 0) }, "closed")
	expect(t, StatusClosed, func() int32 { return WriterCount(h, unsafe.Pointer(&n)) }, "closed")
	must(t, func() int32 { return WriterClose(h) })
	must(t, func() int32 { return WriterAbort(h) })
}

// TestWriterSharedByThreads writes from many OS threads through one handle: every
// sample must land whole, in some order.
func TestWriterSharedByThreads(t *testing.T) {
	noLeaks(t)
	const threads, each = 8, 50
	path := filepath.Join(t.TempDir(), "x.ffr")
	var h int64
	must(t, func() int32 { return WriterCreate(cstr(path), threads*each, CompressNone, unsafe.Pointer(&h)) })
	want := map[string]int{}
	var wg sync.WaitGroup
	for g := range threads {
		samples := randomSamples(uint64(100+g), each, 2000)
		for _, s := range samples {
			want[string(s)]++
		}
		wg.Go(func() {
			for _, s := range samples {
				if r := call(func() int32 { return WriterWrite(h, ptr(s), uint64(len(s))) }); r.status != StatusOK {
					t.Errorf("write: %d %s", r.status, r.msg)
				}
			}
		})
	}
	wg.Wait()
	must(t, func() int32 { return WriterClose(h) })
	for _, s := range readAll(t, path) {
		want[string(s)]--
	}
	for s, n := range want {
		if n != 0 {
			t.Fatalf("a sample of %d bytes is off by %d", len(s), n)
		}
	}
}

// writeBatches writes samples through WriterWriteBatch in consecutive batches of the given
// sizes (cycled), packing each batch back to back as a C caller would.
func writeBatches(t *testing.T, h int64, samples [][]byte, batchSizes ...int) {
	t.Helper()
	for i, b := 0, 0; i < len(samples); b++ {
		batch := samples[i:min(i+batchSizes[b%len(batchSizes)], len(samples))]
		var data []byte
		sizes := make([]uint64, len(batch))
		for k, s := range batch {
			data = append(data, s...)
			sizes[k] = uint64(len(s))
		}
		must(t, func() int32 { return WriterWriteBatch(h, ptr(data), ptr(sizes), uint64(len(batch))) })
		i += len(batch)
	}
}

// TestWriterWriteBatchMatchesWriteOne: batches of any shape (empty batches, empty samples,
// samples past the core's direct-write size) give the very bytes one write per sample gives.
func TestWriterWriteBatchMatchesWriteOne(t *testing.T) {
	noLeaks(t)
	samples := randomSamples(11, 300, 3000)
	samples = append(samples, make([]byte, 1<<20+3), bytes.Repeat([]byte("compressible "), 1000), nil)
	for _, compression := range []int32{CompressNone, CompressLZ4, CompressZstd} {
		for _, declared := range []uint64{uint64(len(samples)), math.MaxUint64} {
			dir := t.TempDir()
			one, batched := filepath.Join(dir, "one.ffr"), filepath.Join(dir, "batched.ffr")
			writeFile(t, one, declared, compression, samples)
			var h int64
			must(t, func() int32 { return WriterCreate(cstr(batched), declared, compression, unsafe.Pointer(&h)) })
			must(t, func() int32 { return WriterWriteBatch(h, nil, nil, 0) })
			writeBatches(t, h, samples, 1, 0, 7, 128, 2, len(samples))
			var count uint64
			must(t, func() int32 { return WriterCount(h, unsafe.Pointer(&count)) })
			if count != uint64(len(samples)) {
				t.Fatalf("count %d after batches of %d samples", count, len(samples))
			}
			must(t, func() int32 { return WriterClose(h) })
			want, err := os.ReadFile(one)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(batched)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("compression %d, n %d: batched file (%d bytes) differs from one-by-one (%d bytes)",
					compression, declared, len(got), len(want))
			}
			equalSamples(t, readAll(t, batched), samples)
		}
	}
}

// TestWriterWriteBatchRefusedWhole: a batch that cannot fit below n, or whose arrays are
// wrong, writes nothing, and the writer carries on.
func TestWriterWriteBatchRefusedWhole(t *testing.T) {
	noLeaks(t)
	path := filepath.Join(t.TempDir(), "x.ffr")
	var h int64
	must(t, func() int32 { return WriterCreate(cstr(path), 3, CompressNone, unsafe.Pointer(&h)) })
	count := func() uint64 {
		var n uint64
		must(t, func() int32 { return WriterCount(h, unsafe.Pointer(&n)) })
		return n
	}
	data, sizes := []byte("abcdef"), []uint64{1, 2, 3}
	must(t, func() int32 { return WriterWriteBatch(h, ptr(data), ptr(sizes), 2) }) // "a", "bc"
	expect(t, StatusInvalid, func() int32 { return WriterWriteBatch(h, ptr(data), ptr(sizes), 2) },
		path, "n=3", "batch of 2 after 2 written", "sample 3", "none of it")
	expect(t, StatusInvalid, func() int32 { return WriterWriteBatch(h, ptr(data), nil, 1) }, "sizes is NULL")
	expect(t, StatusInvalid, func() int32 { return WriterWriteBatch(h, nil, ptr(sizes), 1) }, "data is NULL")
	huge := []uint64{maxSpan, 1}
	expect(t, StatusInvalid, func() int32 { return WriterWriteBatch(h, ptr(data), ptr(huge), 2) }, "add up")
	if c := count(); c != 2 {
		t.Fatalf("count %d after refused batches, want 2", c)
	}
	empty := []uint64{0}
	must(t, func() int32 { return WriterWriteBatch(h, nil, ptr(empty), 1) }) // empty samples need no data
	expect(t, StatusInvalid, func() int32 { return WriterWriteBatch(h, ptr(data), ptr(sizes), 1) }, "n=3")
	must(t, func() int32 { return WriterWriteBatch(h, nil, nil, 0) }) // a full file still takes nothing
	must(t, func() int32 { return WriterClose(h) })
	equalSamples(t, readAll(t, path), [][]byte{[]byte("a"), []byte("bc"), {}})
}

// TestWriterBatchesFromThreadsStayWhole writes batches from several OS threads through one
// handle: every batch must land as consecutive samples, in its own order.
func TestWriterBatchesFromThreadsStayWhole(t *testing.T) {
	noLeaks(t)
	const threads, batches = 4, 40
	rng := rand.New(rand.NewPCG(5, 5))
	plans := make([][]int, threads) // plans[g][b]: samples in batch b of thread g
	total := 0
	for g := range plans {
		for range batches {
			k := 1 + rng.IntN(400)
			plans[g] = append(plans[g], k)
			total += k
		}
	}
	// Sample k of batch b of thread g is "g b k" padded with a few bytes, so that batches
	// differ in size and their samples mix in the write buffer.
	tag := func(g, b, k int) []byte {
		return append([]byte(fmt.Sprintf("%d %d %d ", g, b, k)), bytes.Repeat([]byte{'.'}, (g*7+b*3+k)%50)...)
	}
	path := filepath.Join(t.TempDir(), "x.ffr")
	var h int64
	must(t, func() int32 { return WriterCreate(cstr(path), uint64(total), CompressNone, unsafe.Pointer(&h)) })
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g, plan := range plans {
		wg.Go(func() {
			<-start
			for b, k := range plan {
				var data []byte
				sizes := make([]uint64, k)
				for i := range k {
					s := tag(g, b, i)
					data = append(data, s...)
					sizes[i] = uint64(len(s))
				}
				if r := call(func() int32 { return WriterWriteBatch(h, ptr(data), ptr(sizes), uint64(k)) }); r.status != StatusOK {
					t.Errorf("thread %d batch %d: status %d: %s", g, b, r.status, r.msg)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	must(t, func() int32 { return WriterClose(h) })
	got := readAll(t, path)
	if len(got) != total {
		t.Fatalf("%d samples, want %d", len(got), total)
	}
	seen := make([]int, threads) // batches of each thread found so far, in order
	for i := 0; i < len(got); {
		var g, b, k int
		if _, err := fmt.Sscanf(string(got[i]), "%d %d %d ", &g, &b, &k); err != nil {
			t.Fatalf("sample %d: %q: %v", i, got[i], err)
		}
		if k != 0 || b != seen[g] {
			t.Fatalf("sample %d is sample %d of batch %d of thread %d; want the start of batch %d", i, k, b, g, seen[g])
		}
		for k := range plans[g][b] {
			if want := tag(g, b, k); !bytes.Equal(got[i+k], want) {
				t.Fatalf("sample %d: %q inside batch %d of thread %d, want %q", i+k, got[i+k], b, g, want)
			}
		}
		i += plans[g][b]
		seen[g]++
	}
}
