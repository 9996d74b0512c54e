package core

import (
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// tokenSamples makes documents of random lengths (some empty) of itemSize-byte items,
// each stored after a header of header bytes; it returns the samples, each document's
// items, and the stream's starts (a separator position after each document when sep).
func tokenSamples(rng *rand.Rand, docs, itemSize, header int, sep bool) ([][]byte, [][]int64, []int64, []uint64) {
	samples := make([][]byte, docs)
	items := make([][]int64, docs)
	starts := []int64{0}
	offsets := make([]uint64, docs)
	for k := range samples {
		n := rng.IntN(40)
		sample := make([]byte, header+n*itemSize)
		for i := range n {
			v := rng.Uint64() >> (64 - 8*itemSize)
			if itemSize == 8 {
				v >>= 1
			}
			items[k] = append(items[k], int64(v))
			var word [8]byte
			binary.LittleEndian.PutUint64(word[:], v)
			copy(sample[header+i*itemSize:], word[:itemSize])
		}
		samples[k], offsets[k] = sample, uint64(header)
		length := int64(n)
		if sep {
			length++
		}
		starts = append(starts, starts[k]+length)
	}
	return samples, items, starts, offsets
}

func TestReadWindowsMatchesTheConcatenation(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, itemSize := range []int{1, 2, 4, 8} {
		for _, sep := range []bool{false, true} {
			samples, items, starts, offsets := tokenSamples(rng, 60, itemSize, 5, sep)
			paths := rangeDataset(t, samples, 25, CompressNone)
			r := openReader(t, ReaderOptions{CheckData: true}, paths...)
			separator := int64(-1)
			var stream []int64
			for _, doc := range items {
				stream = append(stream, doc...)
				if sep {
					separator = 99
					stream = append(stream, separator)
				}
			}
			s := ItemStream{Starts: starts, DataOffsets: offsets, ItemSize: itemSize, Separator: separator}
			for _, shape := range [][2]uint64{{7, 8}, {16, 16}, {1, 1}, {50, 61}} {
				stride, width := shape[0], shape[1]
				count := (uint64(len(stream))-width)/stride + 1
				blocks := []uint64{count - 1, 0, count / 2, count / 2, 3}
				dst := make([]int64, uint64(len(blocks))*width)
				if err := r.ReadWindows(s, blocks, stride, width, dst); err != nil {
					t.Fatal(err)
				}
				for j, b := range blocks {
					want := stream[b*stride : b*stride+width]
					got := dst[uint64(j)*width : uint64(j+1)*width]
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("items %d sep %v stride %d width %d block %d: position %d is %d, want %d",
								itemSize, sep, stride, width, b, i, got[i], want[i])
						}
					}
				}
				err := r.ReadWindows(s, []uint64{0, count}, stride, width, dst)
				if !errors.Is(err, ErrIndex) || !strings.Contains(err.Error(), "block") {
					t.Fatalf("a block past the end: %v", err)
				}
			}
		}
	}
}

func TestReadWindowsRejectsBadArguments(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	samples, _, starts, offsets := tokenSamples(rng, 10, 2, 0, false)
	r := openReader(t, ReaderOptions{}, rangeDataset(t, samples, 5, CompressNone)...)
	good := ItemStream{Starts: starts, DataOffsets: offsets, ItemSize: 2, Separator: -1}
	dst := make([]int64, 8)
	for name, call := range map[string]func() error{
		"item size": func() error {
			s := good
			s.ItemSize = 3
			return r.ReadWindows(s, []uint64{0}, 4, 4, dst)
		},
		"offsets": func() error {
			s := good
			s.DataOffsets = offsets[:3]
			return r.ReadWindows(s, []uint64{0}, 4, 4, dst)
		},
		"width": func() error { return r.ReadWindows(good, []uint64{0}, 4, 0, dst) },
		"order": func() error {
			s := good
			s.Starts = append([]int64(nil), starts...)
			s.Starts[1] = s.Starts[2] + 1 // sample 1 would end before it begins
			width := uint64(s.Starts[len(s.Starts)-1])
			return r.ReadWindows(s, []uint64{0}, 1, width, make([]int64, width))
		},
	} {
		if err := call(); !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrIndex) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := r.ReadWindows(good, []uint64{0, 1, 2}, 4, 4, dst); !errors.Is(err, io.ErrShortBuffer) {
		t.Errorf("short buffer: %v", err)
	}
}
