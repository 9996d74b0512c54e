package core

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Batches between sharedBytes and parallelBytes are delivered by the caller and a helper
// that joins in when it starts: whoever delivers each chunk, every sample arrives whole,
// in its place, across the files of a dataset, repeated indices and empty samples included.
func TestSharedDeliveryMatchesWritten(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 19))
	var paths []string
	var samples [][]byte
	for f := range 2 {
		part := randomSamples(rng, 400, 2000)
		part[rng.IntN(len(part))] = nil
		paths = append(paths, tempPath(t, fmt.Sprintf("p%d.ffr", f)))
		writeSamples(t, paths[f], part, WriterOptions{})
		samples = append(samples, part...)
	}
	r := openReader(t, ReaderOptions{CheckData: true}, paths...)
	shared := 0
	for range 60 {
		indices := make([]uint64, 150+rng.IntN(250))
		for k := range indices {
			indices[k] = uint64(rng.IntN(len(samples)))
		}
		got, err := readSamples(r, indices)
		if err != nil {
			t.Fatal(err)
		}
		var total int
		for k, i := range indices {
			total += len(samples[i])
			if !bytes.Equal(got[k], samples[i]) {
				t.Fatalf("sample %d (position %d of %d): wrong bytes", i, k, len(indices))
			}
		}
		if total >= sharedBytes && total < parallelBytes {
			shared++
		}
	}
	if shared < 30 {
		t.Fatalf("only %d of 60 batches were in the shared range", shared)
	}
}

// A bad sample is reported, named, wherever it falls in a shared batch: in a chunk of the
// caller's or of the helper's.
func TestSharedDeliveryReportsBadSample(t *testing.T) {
	const n, size, bad = 300, 1000, 123
	path := damagedFile(t, "bad.ffr", n, size, bad)
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	dst, sizes := make([]byte, n*size), make([]uint64, n)
	rng := rand.New(rand.NewPCG(19, 4))
	for _, at := range []int{0, 1, 150, 298, 299} {
		for range 20 {
			indices := slices.DeleteFunc(rng.Perm(n), func(i int) bool { return i == bad })
			indices = slices.Insert(indices, at, bad)
			order := make([]uint64, len(indices))
			for k, i := range indices {
				order[k] = uint64(i)
			}
			err := r.ReadBatch(order, dst, sizes)
			if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), fmt.Sprintf("sample %d:", bad)) {
				t.Fatalf("bad sample at position %d: got %v", at, err)
			}
		}
	}
}
