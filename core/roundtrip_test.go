package core

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var boundarySizes = []int{0, 1, 2, 511, 512, 513, 4095, 4096, 4097, 65535, 65536, 65537,
	1<<20 - 1, 1 << 20, 1<<20 + 1, directWriteMin - 1, directWriteMin, writeBuffer + 1}

func TestRoundTripBoundarySizes(t *testing.T) {
	for _, comp := range []Compression{CompressNone, CompressLZ4} {
		for _, size := range boundarySizes {
			t.Run(fmt.Sprintf("%v/size=%d", comp, size), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(size), 1))
				samples := [][]byte{make([]byte, size), randomSamples(rng, 1, size)[0], make([]byte, size)}
				path := tempPath(t, "s.ffr")
				writeSamples(t, path, samples, WriterOptions{Compression: comp})
				for _, opts := range []ReaderOptions{{CheckData: true}, {}, {CheckData: true, Direct: true}} {
					r := openReader(t, opts, path)
					assertSamples(t, readAll(t, r), samples)
				}
			})
		}
	}
}

func TestRoundTripRandom(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		for _, comp := range []Compression{CompressNone, CompressLZ4} {
			t.Run(fmt.Sprintf("seed=%d/%v", seed, comp), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 2))
				samples := randomSamples(rng, 1+rng.IntN(300), 1+rng.IntN(20000))
				path := tempPath(t, "r.ffr")
				writeSamples(t, path, samples, WriterOptions{Compression: comp})
				r := openReader(t, ReaderOptions{CheckData: true}, path)
				indices := make([]uint64, 1+rng.IntN(3*len(samples)))
				want := make([][]byte, len(indices))
				for k := range indices {
					indices[k] = uint64(rng.IntN(len(samples)))
					want[k] = samples[indices[k]]
				}
				got, err := readSamples(r, indices)
				if err != nil {
					t.Fatal(err)
				}
				assertSamples(t, got, want)
				if bad, err := badIndices(r, 0, r.Len()); err != nil || len(bad) != 0 {
					t.Fatalf("Verify: err %v, bad samples %v", err, bad)
				}
			})
		}
	}
}

func TestUnknownCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	samples := randomSamples(rng, 500, 3000)
	samples = append(samples, make([]byte, 2*writeBuffer))
	for _, comp := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
		t.Run(comp.String(), func(t *testing.T) {
			dir := t.TempDir()
			known, unknown := filepath.Join(dir, "known.ffr"), filepath.Join(dir, "unknown.ffr")
			writeSamples(t, known, samples, WriterOptions{Compression: comp})
			writeDeclared(t, unknown, UnknownCount, samples, WriterOptions{Compression: comp})
			a, _ := os.ReadFile(known)
			b, _ := os.ReadFile(unknown)
			if string(a) != string(b) {
				t.Fatal("a file written without n differs from the same samples written with n")
			}
			onlyEntries(t, dir, "known.ffr", "unknown.ffr") // no staging file left behind
		})
	}
}

func TestMultiFileAndDirectoryDatasets(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 3))
	var all [][]byte
	counts := []int{5, 0, 17, 1, 9}
	var paths []string
	for k, n := range counts {
		samples := randomSamples(rng, n, 5000)
		comp := Compression(k % 2)
		path := filepath.Join(dir, fmt.Sprintf("PART_%05d.ffr", k))
		writeSamples(t, path, samples, WriterOptions{Compression: comp})
		all = append(all, samples...)
		paths = append(paths, path)
	}
	// Files that must not join the dataset.
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".hidden.ffr"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string][]string{"dir": {dir}, "list": paths} {
		t.Run(name, func(t *testing.T) {
			r := openReader(t, ReaderOptions{CheckData: true}, open...)
			if strings.Join(r.Files(), ",") != strings.Join(paths, ",") {
				t.Fatalf("Files = %v", r.Files())
			}
			for k, n := range counts {
				if r.FileCounts()[k] != uint64(n) {
					t.Fatalf("FileCounts = %v, want %v", r.FileCounts(), counts)
				}
			}
			assertSamples(t, readAll(t, r), all)
			if _, err := readSamples(r, []uint64{r.Len()}); !errors.Is(err, ErrIndex) {
				t.Fatalf("index past the end: err = %v, want ErrIndex", err)
			}
			if bad, err := badIndices(r, 3, 20); err != nil || len(bad) != 0 {
				t.Fatalf("Verify: %v %v", err, bad)
			}
		})
	}
}

func TestReaderLifecycleAndBuffers(t *testing.T) {
	path := tempPath(t, "l.ffr")
	samples := [][]byte{[]byte("abc"), []byte("defgh")}
	writeSamples(t, path, samples, WriterOptions{})
	r, err := Open([]string{path}, ReaderOptions{CheckData: true})
	if err != nil {
		t.Fatal(err)
	}
	sizes := make([]uint64, 2)
	err = r.ReadBatch([]uint64{0, 1}, make([]byte, 7), sizes)
	if !errors.Is(err, io.ErrShortBuffer) || sizes[0] != 3 || sizes[1] != 5 {
		t.Fatalf("short buffer: err = %v, sizes = %v", err, sizes)
	}
	if err := r.ReadBatch([]uint64{0, 1}, make([]byte, 8), sizes[:1]); !errors.Is(err, ErrInvalid) {
		t.Fatalf("too few sizes: err = %v", err)
	}
	if err := r.ReadBatch(nil, nil, nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := r.ReadBatch([]uint64{0}, make([]byte, 8), sizes); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: err = %v", err)
	}
	if err := r.Sizes([]uint64{0}, sizes); !errors.Is(err, ErrClosed) {
		t.Fatalf("sizes after close: err = %v", err)
	}
	if _, err := badIndices(r, 0, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("verify after close: err = %v", err)
	}
}
