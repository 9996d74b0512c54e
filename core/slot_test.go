package core

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"
)

// guardSize is the region after a caller's buffer that no read may touch.
const (
	guardSize = 64
	guardByte = 0xA5
)

// guarded returns a buffer of n bytes followed, within its capacity, by a guard region.
func guarded(n int) []byte {
	buf := make([]byte, n+guardSize)
	for k := range buf {
		buf[k] = guardByte
	}
	return buf[:n]
}

// guardIntact reports where the guard region after buf was written, or -1.
func guardIntact(buf []byte) int {
	for k, c := range buf[len(buf):cap(buf)] {
		if c != guardByte {
			return k
		}
	}
	return -1
}

// slotSizes are sample sizes at the boundaries of the compressions' blocks and of pages.
var slotSizes = []int{0, 1, 2, 7, 8, 9, 15, 16, 17, 255, 256, 257, 370, 4095, 4096, 4097, 65535, 65536, 65537, 131073}

// slotContents makes samples of each size that compress well and that do not.
func slotContents(rng *rand.Rand) [][]byte {
	var samples [][]byte
	for _, n := range slotSizes {
		random := make([]byte, n)
		fillRandom(rng, random)
		repetitive := make([]byte, n)
		unit := make([]byte, 100)
		fillRandom(rng, unit)
		for k := 0; k < n; k += len(unit) {
			copy(repetitive[k:], unit)
		}
		samples = append(samples, random, repetitive)
	}
	return samples
}

// Every compression decodes into its slot and nowhere else: the guard after the slot, which
// the slot's capacity reaches as a batch buffer's next sample would, stays untouched.
func TestDecodeStaysInItsSlot(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, compression := range []byte{compressionLZ4, compressionZstd} {
		c := compressor{compression: compression}
		for _, sample := range slotContents(rng) {
			stored := bytes.Clone(c.store(sample))
			slot := guarded(len(sample))
			if err := decode(c.compressions[len(c.compressions)-1], stored, slot); err != nil {
				t.Fatalf("%s, %d bytes: %v", compressionName(compression), len(sample), err)
			}
			if !bytes.Equal(slot, sample) {
				t.Fatalf("%s, %d bytes: decoded bytes differ", compressionName(compression), len(sample))
			}
			if at := guardIntact(slot); at >= 0 {
				t.Fatalf("%s, %d bytes: byte %d past the slot was written", compressionName(compression), len(sample), at)
			}
		}
	}
}

// The case of issue 17: 10,000 copies of a ~370-byte compressible sample (100 random
// bytes three times behind a small table), written with Zstandard and read in one batch
// split among goroutines. The first sample of each goroutine's share was overwritten by
// the end of the previous sample's decoding.
func TestZstdBatchSplitAmongGoroutines(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 1))
	unit := make([]byte, 100)
	fillRandom(rng, unit)
	table := make([]byte, 70)
	for k := range table {
		table[k] = byte(k % 7)
	}
	sample := append(table, bytes.Repeat(unit, 3)...)
	samples := make([][]byte, 10000)
	for k := range samples {
		samples[k] = sample
	}
	path := tempPath(t, "zstd.ffr")
	writeSamples(t, path, samples, WriterOptions{Compression: CompressZstd})
	want := bytes.Repeat(sample, len(samples))
	for _, procs := range []int{1, 2, 4, 8} {
		for _, check := range []bool{false, true} {
			t.Run(fmt.Sprintf("GOMAXPROCS=%d/check=%v", procs, check), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				r := openReader(t, ReaderOptions{CheckData: check}, path)
				batchStaysInside(t, r, span(0, r.Len()), want)
			})
		}
	}
}

// batchStaysInside reads indices in one batch into a guarded buffer and checks that it
// holds want and that nothing was written past it.
func batchStaysInside(t *testing.T, r *Reader, indices []uint64, want []byte) {
	t.Helper()
	dst := guarded(len(want))
	sizes := make([]uint64, len(indices))
	if err := r.ReadBatch(indices, dst, sizes); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, want) {
		at := 0
		for at < len(want) && dst[at] == want[at] {
			at++
		}
		t.Fatalf("batch differs from byte %d on", at)
	}
	if at := guardIntact(dst); at >= 0 {
		t.Fatalf("byte %d past the batch was written", at)
	}
}

// FuzzCompressedBatch cuts the input into samples, writes them with each compression and
// reads them back in one batch (split among goroutines when large): nothing may panic,
// the batch must hold the samples and the bytes after the caller's buffer stay untouched.
func FuzzCompressedBatch(f *testing.F) {
	f.Add([]byte("ab"), uint16(3), uint8(0))
	f.Add(bytes.Repeat([]byte("0123456789abcdef"), 30), uint16(370), uint8(200))
	f.Add(bytes.Repeat([]byte{7}, 4097), uint16(4096), uint8(40))
	f.Add(bytes.Repeat([]byte("xy"), 2000), uint16(255), uint8(255))
	unit := make([]byte, 100)
	fillRandom(rand.New(rand.NewPCG(17, 2)), unit)
	f.Add(append(bytes.Repeat([]byte{1, 0, 2}, 23), bytes.Repeat(unit, 3)...), uint16(369), uint8(255))
	dir := memoryDir(f)
	f.Fuzz(func(t *testing.T, data []byte, size uint16, copies uint8) {
		// Samples of size bytes cut from data, then that many copies of data whole (a
		// large batch), so both short odd samples and batches over parallelBytes occur.
		samples := [][]byte{nil}
		step := max(int(size), 1, len(data)/2000) // at most 2,000 samples: a fuzz run stays quick
		for at := 0; at < len(data); at += step {
			samples = append(samples, data[at:min(len(data), at+int(size))])
		}
		// Up to 9/8 of parallelBytes of copies (copies/255 of it), in at most 4,000 samples.
		for range min(4000, int(copies)*(parallelBytes*9/8/255)/max(len(data), 1)) {
			samples = append(samples, data)
		}
		want := bytes.Join(samples, nil)
		for _, comp := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
			path := filepath.Join(dir, comp.String()+".ffr")
			writeSamples(t, path, samples, WriterOptions{Compression: comp})
			r, err := Open([]string{path}, ReaderOptions{CheckData: true})
			if err != nil {
				t.Fatal(err)
			}
			batchStaysInside(t, r, span(0, r.Len()), want)
			_ = r.Close()
		}
	})
}
