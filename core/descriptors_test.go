package core

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// openDescriptors counts this process's open file descriptors on files in dir (other
// tests' connections may come and go meanwhile).
func openDescriptors(t testing.TB, dir string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && filepath.Dir(target) == dir {
			n++
		}
	}
	return n
}

// smallDataset writes files files of n random samples each (half compressible, compressed
// with comp) and returns their paths and samples in dataset order.
func smallDataset(t testing.TB, files, n int, comp Compression) ([]string, [][]byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(files), uint64(n)))
	dir := t.TempDir()
	var paths []string
	var all [][]byte
	for k := range files {
		samples := randomSamples(rng, n, 3000)
		path := filepath.Join(dir, fmt.Sprintf("%04d.ffr", k))
		writeSamples(t, path, samples, WriterOptions{Compression: comp})
		paths, all = append(paths, path), append(all, samples...)
	}
	return paths, all
}

// A reader asked to hold no descriptors holds none for small local files, and the process
// has no more open than before; without the request, one per file.
func TestNoDescriptorsHoldsNone(t *testing.T) {
	paths, _ := smallDataset(t, 64, 4, CompressNone)
	dir := filepath.Dir(paths[0])
	for _, noDescriptors := range []bool{true, false} {
		r := openReader(t, ReaderOptions{CheckData: true, NoDescriptors: noDescriptors}, paths...)
		held := uint64(len(paths))
		if noDescriptors {
			held = 0
		}
		if got := r.Descriptors(); got != held {
			t.Fatalf("NoDescriptors=%v: Descriptors = %d, want %d", noDescriptors, got, held)
		}
		if got := openDescriptors(t, dir); got != int(held) {
			t.Fatalf("NoDescriptors=%v: %d descriptors open on the files, want %d", noDescriptors, got, held)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if got := r.Descriptors(); got != 0 {
			t.Fatalf("closed reader: Descriptors = %d", got)
		}
	}
}

// readPaths are the ways a reader reads samples, each giving what it read as bytes, so that
// a reader without descriptors can be compared with one that has them.
var readPaths = []struct {
	name string
	read func(r *Reader, rng *rand.Rand) ([]byte, error)
}{
	{"batch", func(r *Reader, rng *rand.Rand) ([]byte, error) {
		return joined(readSamples(r, randomIndices(rng, r.Len(), 64)))
	}},
	{"large batch", func(r *Reader, rng *rand.Rand) ([]byte, error) { // past parallelBytes: split across goroutines
		return joined(readSamples(r, randomIndices(rng, r.Len(), 2000)))
	}},
	{"single", func(r *Reader, rng *rand.Rand) ([]byte, error) {
		return joined(readSamples(r, randomIndices(rng, r.Len(), 1)))
	}},
	{"ranges", func(r *Reader, rng *rand.Rand) ([]byte, error) {
		sizes := make([]uint64, r.Len())
		if err := r.Sizes(span(0, r.Len()), sizes); err != nil {
			return nil, err
		}
		var ranges []Range
		for _, i := range randomIndices(rng, r.Len(), 50) {
			off := rng.Uint64N(sizes[i] + 1)
			ranges = append(ranges, Range{Index: i, Offset: off, Length: rng.Uint64N(sizes[i] - off + 1)})
		}
		return readRanges(r, ranges)
	}},
	{"verify", func(r *Reader, _ *rand.Rand) ([]byte, error) {
		bad, err := badIndices(r, 0, r.Len())
		return fmt.Append(nil, bad), err
	}},
	{"prefetch", func(r *Reader, rng *rand.Rand) ([]byte, error) {
		indices := randomIndices(rng, r.Len(), 64)
		for _, path := range r.Files() {
			evictPath(path)
		}
		if _, err := r.Prefetch(indices); err != nil {
			return nil, err
		}
		return joined(readSamples(r, indices))
	}},
}

// assertSameReads reads the same random samples with both readers on every read path, and
// fails unless both read them all alike.
func assertSameReads(t *testing.T, without, with *Reader, what string) {
	t.Helper()
	for _, p := range readPaths {
		seed := rand.Uint64()
		got, err := p.read(without, rand.New(rand.NewPCG(seed, 1)))
		want, wantErr := p.read(with, rand.New(rand.NewPCG(seed, 1)))
		if err != nil || wantErr != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s %s: %d bytes (%v) without descriptors, %d (%v) with",
				what, p.name, len(got), err, len(want), wantErr)
		}
	}
}

func randomIndices(rng *rand.Rand, n uint64, k int) []uint64 {
	out := make([]uint64, k)
	for j := range out {
		out[j] = rng.Uint64N(n)
	}
	return out
}

func joined(samples [][]byte, err error) ([]byte, error) {
	return bytes.Join(samples, nil), err
}

// evictPath drops what the page cache holds of path and no process maps, as a cold read
// finds it.
func evictPath(path string) {
	if f, err := os.Open(path); err == nil {
		_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		_ = f.Close()
	}
}

// Every read path gives the same bytes with and without descriptors, for raw and compressed
// files, with and without checks, warm, cold (readCold leaves the samples of a file without
// a descriptor in its mapping), and with a damaged sample that Verify and checked reads find.
func TestNoDescriptorsReadsEqual(t *testing.T) {
	for _, comp := range []Compression{CompressNone, CompressLZ4} {
		paths, samples := smallDataset(t, 5, 200, comp)
		for _, check := range []bool{true, false} {
			without := openReader(t, ReaderOptions{CheckData: check, NoDescriptors: true}, paths...)
			with := openReader(t, ReaderOptions{CheckData: check}, paths...)
			if without.Descriptors() != 0 || with.Descriptors() != uint64(len(paths)) {
				t.Fatalf("descriptors: %d without, %d with", without.Descriptors(), with.Descriptors())
			}
			for _, path := range paths {
				evictPath(path)
			}
			assertSamples(t, readAll(t, without), samples) // cold: through readCold
			assertSameReads(t, without, with, fmt.Sprintf("%v check=%v", comp, check))
		}
	}
	path := damagedFile(t, "bad.ffr", 30, 500, 4, 17)
	without := openReader(t, ReaderOptions{CheckData: true, NoDescriptors: true}, path)
	if bad, err := badIndices(without, 0, 30); err != nil || fmt.Sprint(bad) != "[4 17]" {
		t.Fatalf("Verify without descriptors: bad %v, err %v; want [4 17]", bad, err)
	}
	if _, err := readSamples(without, []uint64{3, 17}); !errors.Is(err, ErrChecksum) {
		t.Fatalf("a damaged sample read without a descriptor: err = %v, want ErrChecksum", err)
	}
}

// The golden files read the same without descriptors.
func TestNoDescriptorsGolden(t *testing.T) {
	for name, want := range loadManifest(t).Files {
		t.Run(name, func(t *testing.T) {
			r := openReader(t, ReaderOptions{CheckData: true, NoDescriptors: true}, filepath.Join("testdata", name))
			if r.Descriptors() != 0 {
				t.Fatalf("Descriptors = %d, want 0", r.Descriptors())
			}
			for i, s := range readAll(t, r) {
				if uint64(len(s)) != want.Samples[i].Len || sha(s) != want.Samples[i].SHA256 {
					t.Fatalf("sample %d: len %d sha %s, want len %d sha %s",
						i, len(s), sha(s), want.Samples[i].Len, want.Samples[i].SHA256)
				}
			}
			if bad, err := badIndices(r, 0, r.Len()); err != nil || len(bad) != 0 {
				t.Fatalf("Verify: bad %v, err %v", bad, err)
			}
		})
	}
}

// A file cut short after it was opened without a descriptor gives ErrCorrupt on every read
// path, never a crash; a prefetch of what is gone is only a hint that does nothing.
func TestNoDescriptorsTruncated(t *testing.T) {
	path := tempPath(t, "t.ffr")
	samples := [][]byte{benchSample(10000), benchSample(20000), benchSample(30000)}
	writeSamples(t, path, samples, WriterOptions{})
	r := openReader(t, ReaderOptions{CheckData: true, NoDescriptors: true}, path)
	assertSamples(t, readAll(t, r), samples)
	header, _ := headerSize(3)
	if err := os.Truncate(path, int64(header)+100); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Prefetch([]uint64{1, 2}); err != nil {
		t.Fatalf("Prefetch after truncation: %v", err)
	}
	for _, indices := range [][]uint64{{1}, {2}, {0, 1, 2}} {
		if _, err := readSamples(r, indices); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("samples %v after truncation: err = %v, want ErrCorrupt", indices, err)
		}
	}
	if _, err := readRanges(r, []Range{{Index: 2, Offset: 5, Length: 10}}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a range after truncation: err = %v, want ErrCorrupt", err)
	}
	if _, err := badIndices(r, 0, 3); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify after truncation: err = %v, want ErrCorrupt", err)
	}
}

// A file replaced by rename after it was opened without a descriptor reads as opened.
func TestNoDescriptorsReplacedByRename(t *testing.T) {
	dir := t.TempDir()
	path, next := filepath.Join(dir, "a.ffr"), filepath.Join(dir, "next.ffr")
	opened := [][]byte{[]byte("first"), []byte("version")}
	writeSamples(t, path, opened, WriterOptions{})
	r := openReader(t, ReaderOptions{CheckData: true, NoDescriptors: true}, path)
	writeSamples(t, next, [][]byte{[]byte("second"), []byte("one"), []byte("longer")}, WriterOptions{})
	if err := os.Rename(next, path); err != nil {
		t.Fatal(err)
	}
	if r.Len() != 2 {
		t.Fatalf("Len = %d after the rename, want 2", r.Len())
	}
	assertSamples(t, readAll(t, r), opened)
	if bad, err := badIndices(r, 0, 2); err != nil || len(bad) != 0 {
		t.Fatalf("Verify after the rename: bad %v, err %v", bad, err)
	}
}

// The request is not a promise: files that cannot be read from their mappings alone keep
// their descriptors (Direct mode; files past mappedBudget, once those that gave theirs up
// fill it), and read the same.
func TestNoDescriptorsKeptWhereNeeded(t *testing.T) {
	paths, samples := smallDataset(t, 3, 100, CompressNone)
	size := func(path string) uint64 {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return uint64(info.Size())
	}
	direct := openReader(t, ReaderOptions{Direct: true, NoDescriptors: true}, paths...)
	if direct.Descriptors() < uint64(len(paths)) {
		t.Fatalf("Direct: Descriptors = %d, want at least %d", direct.Descriptors(), len(paths))
	}
	assertSamples(t, readAll(t, direct), samples)
	for _, c := range []struct {
		budget uint64
		held   uint64
	}{
		{size(paths[0]) - 1, 3},              // no file fits: all stream with system calls
		{size(paths[0]) + size(paths[1]), 1}, // the first two fit, the third streams
		{size(paths[0]) + size(paths[1]) + size(paths[2]), 0},
	} {
		t.Run(fmt.Sprintf("budget=%d", c.budget), func(t *testing.T) {
			defer setMappedBudget(c.budget)()
			r := openReader(t, ReaderOptions{CheckData: true, NoDescriptors: true}, paths...)
			if r.Descriptors() != c.held {
				t.Fatalf("Descriptors = %d, want %d", r.Descriptors(), c.held)
			}
			if r.window.streamData != (c.held > 0) {
				t.Fatalf("streamData = %v with %d files keeping their descriptors", r.window.streamData, c.held)
			}
			with := openReader(t, ReaderOptions{CheckData: true}, paths...)
			assertSameReads(t, r, with, "")
		})
	}
}

// BenchmarkReadManyFiles reads random batches of 64 samples of 1 KiB from 2,000 files of 16
// samples each (a mixture of many small datasets), with and without descriptors: warm from
// the page cache, and cold (every file dropped from it before each batch, untimed; a reader
// without descriptors first drops its mapped pages, which the page cache would keep).
func BenchmarkReadManyFiles(b *testing.B) {
	const files, perFile = 2000, 16
	c := readCase{size: 1 << 10, batch: 64}
	dir := b.TempDir()
	paths := make([]string, files)
	for k := range paths {
		paths[k] = filepath.Join(dir, fmt.Sprintf("%04d.ffr", k))
		writeSamples(b, paths[k], slices.Repeat([][]byte{benchSample(c.size)}, perFile), WriterOptions{})
	}
	for _, cold := range []bool{false, true} {
		for _, noDescriptors := range []bool{false, true} {
			b.Run(fmt.Sprintf("cache=%s/descriptors=%v", map[bool]string{false: "warm", true: "cold"}[cold], !noDescriptors), func(b *testing.B) {
				r := openReader(b, ReaderOptions{CheckData: true, NoDescriptors: noDescriptors}, paths...)
				var evict func()
				if cold {
					evict = func() {
						for _, f := range r.files {
							f.release(0, f.size)
							evictPath(f.path)
						}
					}
				}
				readRandomBatches(b, r, files*perFile, c, evict)
			})
		}
	}
}
