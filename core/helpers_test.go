package core

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeSamples writes samples to path with opts and fails the test on any error.
func writeSamples(t testing.TB, path string, samples [][]byte, opts WriterOptions) {
	t.Helper()
	writeDeclared(t, path, uint64(len(samples)), samples, opts)
}

// writeDeclared is writeSamples with the count given to Create (e.g. UnknownCount).
func writeDeclared(t testing.TB, path string, n uint64, samples [][]byte, opts WriterOptions) {
	t.Helper()
	w, err := Create(path, n, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		if err := w.WriteOne(s); err != nil {
			t.Fatal(err)
		}
	}
	if w.Count() != uint64(len(samples)) {
		t.Fatalf("Count = %d after %d samples", w.Count(), len(samples))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// openReader opens paths and closes the reader when the test ends.
func openReader(t testing.TB, opts ReaderOptions, paths ...string) *Reader {
	t.Helper()
	r, err := Open(paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// readSamples reads the given indices in one batch and returns them as separate slices.
func readSamples(r *Reader, indices []uint64) ([][]byte, error) {
	sizes := make([]uint64, len(indices))
	if err := r.Sizes(indices, sizes); err != nil {
		return nil, err
	}
	var total uint64
	for _, s := range sizes {
		total += s
	}
	dst := make([]byte, total)
	if err := r.ReadBatch(indices, dst, sizes); err != nil {
		return nil, err
	}
	return cutSamples(dst, sizes), nil
}

// cutSamples cuts the samples read back to back into buf at their sizes.
func cutSamples(buf []byte, sizes []uint64) [][]byte {
	out := make([][]byte, len(sizes))
	var pos uint64
	for k, s := range sizes {
		out[k] = buf[pos : pos+s]
		pos += s
	}
	return out
}

// readAll reads every sample of r, in order.
func readAll(t testing.TB, r *Reader) [][]byte {
	t.Helper()
	samples, err := readSamples(r, span(0, r.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return samples
}

func span(from, to uint64) []uint64 {
	out := make([]uint64, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// randomSamples makes n samples with sizes drawn up to maxSize, half of them compressible.
func randomSamples(rng *rand.Rand, n, maxSize int) [][]byte {
	samples := make([][]byte, n)
	for k := range samples {
		s := make([]byte, rng.IntN(maxSize+1))
		if k%2 == 0 {
			fillRandom(rng, s)
		} else {
			copy(s, bytes.Repeat([]byte("ffrecord sample text "), len(s)/21+1))
		}
		samples[k] = s
	}
	return samples
}

func assertSamples(t testing.TB, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d samples, want %d", len(got), len(want))
	}
	for k := range want {
		if !bytes.Equal(got[k], want[k]) {
			t.Fatalf("sample %d: got %d bytes, want %d bytes (contents differ)", k, len(got[k]), len(want[k]))
		}
	}
}

// fillRandom fills b with bytes from rng, eight at a time.
func fillRandom(rng *rand.Rand, b []byte) {
	for i := 0; i < len(b); i += 8 {
		v := rng.Uint64()
		for k := i; k < min(i+8, len(b)); k++ {
			b[k] = byte(v)
			v >>= 8
		}
	}
}

func tempPath(t testing.TB, name string) string { return filepath.Join(t.TempDir(), name) }

// memoryDir is a scratch directory in memory when /dev/shm exists: every fuzz input is
// written to a file, and on a busy disk creating and removing files stalls for seconds.
func memoryDir(t testing.TB) string {
	dir, err := os.MkdirTemp("/dev/shm", "ffrecord-fuzz-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// onlyEntries fails unless dir holds exactly the given names.
func onlyEntries(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("directory holds %v, want %v", got, names)
	}
}

// badIndices are the dataset indices of the bad samples Verify finds in [start, start+count).
func badIndices(r *Reader, start, count uint64) ([]uint64, error) {
	var bad []uint64
	err := r.Verify(start, count, func(b BadSample) bool {
		bad = append(bad, b.Index)
		return true
	})
	return bad, err
}

// flipBit flips the lowest bit of the byte at off of the file at path, in place.
func flipBit(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}
