package core

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// Every buffered write ends at a multiple of folioAlign in the file (samples split across
// two writes where they straddle one), but for the one before a large sample, which is
// written straight to the file, and the last; every sample reads back whole.
func TestBufferedWritesEndAligned(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 19))
	const target, large = 14 << 20, 6 << 20
	for _, sizes := range [][]int{{1000}, {4096}, {1, 3000, 70_000}} {
		var samples [][]byte
		for total, k := 0, 0; total < target; k++ {
			size := sizes[k%len(sizes)]
			if total < large && total+size >= large {
				size = directWriteMin
			}
			samples = append(samples, make([]byte, size))
			fillRandom(rng, samples[k])
			total += size
		}
		path := tempPath(t, "aligned.ffr")
		w, err := Create(path, uint64(len(samples)), WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w.SetDurable(false)
		writes := 0
		for k, s := range samples {
			start := w.dataAt + w.pos - uint64(len(w.buf))
			if err := w.WriteOne(s); err != nil {
				t.Fatal(err)
			}
			if end := w.dataAt + w.pos - uint64(len(w.buf)); end != start && len(s) < directWriteMin {
				writes++
				if end%folioAlign != 0 {
					t.Fatalf("sizes %v: sample %d: a buffered write ended at %d, not a multiple of %d",
						sizes, k, end, folioAlign)
				}
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if writes < 2 {
			t.Fatalf("sizes %v: %d buffered writes before Close: the test wrote too little", sizes, writes)
		}
		assertSamples(t, readAll(t, openReader(t, ReaderOptions{CheckData: true}, path)), samples)
	}
}

// Samples of every compression, stored at sizes that straddle the 2 MiB boundaries where
// buffered writes are cut, read back whole, in one batch, with nothing written past it.
func TestSplitWritesReadBackInEveryCompression(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 20))
	var samples [][]byte
	for total := 0; total < 5*folioAlign; {
		s := make([]byte, 2000+rng.IntN(60_000))
		fillRandom(rng, s[:len(s)/2]) // half noise, half zeros: compressed to about half
		samples = append(samples, s)
		total += len(s) / 2
	}
	for _, compression := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
		t.Run(fmt.Sprint(compression), func(t *testing.T) {
			path := tempPath(t, "split.ffr")
			writeSamples(t, path, samples, WriterOptions{Compression: compression})
			r := openReader(t, ReaderOptions{CheckData: true}, path)
			indices, want := make([]uint64, len(samples)), []byte(nil)
			for k, i := range rng.Perm(len(samples)) {
				indices[k] = uint64(i)
				want = append(want, samples[i]...)
			}
			const guard = 64
			got := bytes.Repeat([]byte{0xA5}, len(want)+guard)
			if err := r.ReadBatch(indices, got, make([]uint64, len(indices))); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[:len(want)], want) || !bytes.Equal(got[len(want):], bytes.Repeat([]byte{0xA5}, guard)) {
				t.Fatal("the batch differs from the samples written, or bytes past it were written")
			}
		})
	}
}
