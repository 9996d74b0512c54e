package core

import (
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
