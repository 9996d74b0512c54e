package core

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
)

// Many goroutines read random batches (small ones inline, large ones split across
// goroutines, some through the engine) while the reader is finally closed under them.
func TestConcurrentReadBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	samples := randomSamples(rng, 400, 20000)
	path := tempPath(t, "c.ffr")
	writeSamples(t, path, samples, WriterOptions{})
	for _, opts := range []ReaderOptions{{CheckData: true}, {CheckData: true, Direct: true}} {
		r, err := Open([]string{path}, opts)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 1))
				for range 8 {
					indices := make([]uint64, 1+rng.IntN(150))
					for k := range indices {
						indices[k] = uint64(rng.IntN(len(samples)))
					}
					got, err := readSamples(r, indices)
					if err != nil {
						errs <- err
						return
					}
					for k, i := range indices {
						if !bytes.Equal(got[k], samples[i]) {
							errs <- errors.New("wrong sample bytes")
							return
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		// Close while others still read: each call either succeeds or sees ErrClosed.
		var late sync.WaitGroup
		for range 4 {
			late.Go(func() {
				for range 50 {
					if _, err := readSamples(r, []uint64{0, 1, 2}); err != nil && !errors.Is(err, ErrClosed) {
						t.Errorf("read racing Close: %v", err)
						return
					}
				}
			})
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		late.Wait()
	}
}

// Concurrent WriteOne calls each store one whole sample.
func TestConcurrentWriteOne(t *testing.T) {
	path := tempPath(t, "w.ffr")
	const writers, each = 8, 50
	w, err := Create(path, writers*each, WriterOptions{Compression: CompressLZ4})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				sample := bytes.Repeat([]byte{byte(g)}, 1000+i*997)
				if err := w.WriteOne(sample); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	seen := map[int]int{}
	for _, s := range readAll(t, r) {
		if len(bytes.Trim(s, string(s[:1]))) != 0 {
			t.Fatal("a sample mixes bytes of two writers")
		}
		seen[len(s)]++
	}
	for i := range each {
		if seen[1000+i*997] != writers {
			t.Fatalf("%d samples of length %d, want %d", seen[1000+i*997], 1000+i*997, writers)
		}
	}
}
