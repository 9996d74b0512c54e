package core

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkReadWindows reads batches of 8 language-model blocks (2,049 uint16 tokens)
// from a warm dataset of documents of 50-5,000 tokens, as TokenBlocks does.
func BenchmarkReadWindows(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const header, width, stride = 16, 2049, 2048
	var samples [][]byte
	starts := []int64{0}
	var offsets []uint64
	for starts[len(starts)-1] < 2_000_000 {
		n := 50 + rng.IntN(4951)
		sample := make([]byte, header+2*n)
		for i := header; i < len(sample); i++ {
			sample[i] = byte(rng.Uint32())
		}
		samples = append(samples, sample)
		offsets = append(offsets, header)
		starts = append(starts, starts[len(starts)-1]+int64(n))
	}
	path := b.TempDir() + "/tokens.ffr"
	writeSamples(b, path, samples, WriterOptions{})
	r := openReader(b, ReaderOptions{}, path)
	s := ItemStream{Starts: starts, DataOffsets: offsets, ItemSize: 2, Separator: -1}
	count := uint64(starts[len(starts)-1]-width)/stride + 1
	dst := make([]int64, 8*width)
	blocks := make([]uint64, 8)
	b.SetBytes(int64(len(dst) * 8))
	b.ResetTimer()
	for range b.N {
		for j := range blocks {
			blocks[j] = rng.Uint64N(count)
		}
		if err := r.ReadWindows(s, blocks, stride, width, dst); err != nil {
			b.Fatal(err)
		}
	}
}
