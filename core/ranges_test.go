package core

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readRanges reads ranges into a buffer of exactly their total size and returns it.
func readRanges(r *Reader, ranges []Range) ([]byte, error) {
	var total uint64
	for _, rg := range ranges {
		total += rg.Length
	}
	dst := make([]byte, total)
	return dst, r.ReadRanges(ranges, dst)
}

// wantRanges is what ReadRanges must return for ranges of samples (dataset order).
func wantRanges(samples [][]byte, ranges []Range) []byte {
	var out []byte
	for _, rg := range ranges {
		out = append(out, samples[rg.Index][rg.Offset:rg.Offset+rg.Length]...)
	}
	return out
}

// rangeDataset writes samples over two files (the second holding samples[split:]) and
// returns their paths.
func rangeDataset(t *testing.T, samples [][]byte, split int, compression Compression) []string {
	t.Helper()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.ffr"), filepath.Join(dir, "b.ffr")
	writeSamples(t, a, samples[:split], WriterOptions{Compression: compression})
	writeSamples(t, b, samples[split:], WriterOptions{Compression: compression})
	return []string{a, b}
}

var rangeReaderOptions = []ReaderOptions{{CheckData: true}, {}, {CheckData: true, Direct: true}}

func TestReadRangesBoundaries(t *testing.T) {
	text := bytes.Repeat([]byte("0123456789"), 2000) // compressible: stored compressed
	samples := [][]byte{[]byte("abcdef"), {}, text, []byte("z"), bytes.Clone(text[:777])}
	last := uint64(len(text) - 1)
	cases := []struct {
		name   string
		ranges []Range
	}{
		{"nothing", nil},
		{"zero length at start", []Range{{0, 0, 0}}},
		{"zero length at end", []Range{{0, 6, 0}}},
		{"empty sample", []Range{{1, 0, 0}}},
		{"first byte", []Range{{0, 0, 1}}},
		{"last byte", []Range{{2, last, 1}}},
		{"whole sample", []Range{{2, 0, last + 1}}},
		{"middle", []Range{{2, 4093, 10}}},
		{"one-byte sample", []Range{{3, 0, 1}}},
		{"second file", []Range{{4, 700, 77}}},
		{"across files, repeated, out of order", []Range{{4, 0, 5}, {0, 2, 3}, {4, 0, 5}, {2, 9990, 10}, {0, 0, 6}}},
	}
	for _, compression := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
		paths := rangeDataset(t, samples, 3, compression)
		for _, opts := range rangeReaderOptions {
			r := openReader(t, opts, paths...)
			for _, tc := range cases {
				t.Run(compression.String()+"/"+tc.name, func(t *testing.T) {
					got, err := readRanges(r, tc.ranges)
					if err != nil {
						t.Fatalf("opts %+v: %v", opts, err)
					}
					if want := wantRanges(samples, tc.ranges); !bytes.Equal(got, want) {
						t.Fatalf("opts %+v: got %q..., want %q...", opts, head(got), head(want))
					}
				})
			}
		}
	}
}

func head(b []byte) []byte { return b[:min(len(b), 20)] }

func TestReadRangesRefusals(t *testing.T) {
	samples := [][]byte{[]byte("abcdef"), []byte("ghij")}
	paths := rangeDataset(t, samples, 1, CompressNone)
	r := openReader(t, ReaderOptions{CheckData: true}, paths...)
	cases := []struct {
		name      string
		ranges    []Range
		dst       int
		sentinel  error
		fragments []string
	}{
		{"one byte past the end", []Range{{0, 0, 1}, {1, 1, 4}}, 5, ErrIndex,
			[]string{"b.ffr: sample 0", "bytes [1, 5)", "4-byte sample", "sample 1 of the dataset"}},
		{"offset past the end", []Range{{0, 7, 0}}, 0, ErrIndex, []string{"a.ffr: sample 0", "bytes [7, 7)"}},
		{"length wraps around", []Range{{0, 3, ^uint64(0)}}, 0, ErrIndex, []string{"past the end"}},
		{"index past the dataset", []Range{{2, 0, 1}}, 1, ErrIndex, []string{"sample 2 of a dataset of 2"}},
		{"buffer too small", []Range{{0, 0, 6}, {1, 0, 4}}, 9, io.ErrShortBuffer, []string{"need 10 bytes", "has 9"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := bytes.Repeat([]byte{0xee}, tc.dst)
			err := r.ReadRanges(tc.ranges, dst)
			if !errors.Is(err, tc.sentinel) {
				t.Fatalf("err = %v, want %v", err, tc.sentinel)
			}
			for _, f := range tc.fragments {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error %q does not mention %q", err, f)
				}
			}
			if !bytes.Equal(dst, bytes.Repeat([]byte{0xee}, tc.dst)) {
				t.Fatal("a refused call wrote into dst")
			}
		})
	}
	_ = r.Close()
	if err := r.ReadRanges([]Range{{0, 0, 1}}, make([]byte, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: err = %v, want ErrClosed", err)
	}
}

// A whole-sample range is checked against the sample CRC like ReadBatch; a partial range
// of a raw sample cannot be, and reads what is stored. A partial range of a compressed
// sample decodes the whole stored sample, which is checked.
func TestReadRangesChecksums(t *testing.T) {
	for _, tc := range []struct {
		compression Compression
		sample      []byte
		partialErr  error // reading a part away from the damage
	}{
		{CompressNone, bytes.Repeat([]byte("x"), 100), nil},
		{CompressZstd, bytes.Repeat([]byte("compressible "), 100), ErrChecksum},
	} {
		t.Run(tc.compression.String(), func(t *testing.T) {
			path := tempPath(t, "c.ffr")
			writeSamples(t, path, [][]byte{tc.sample}, WriterOptions{Compression: tc.compression})
			raw, _ := os.ReadFile(path)
			stored := baseLayout(t, path)[0]
			at := len(raw) - len(stored) // the sample's first stored byte
			if tc.compression != CompressNone {
				at = 12 + 12*2
			}
			raw[at+len(stored)-1] ^= 1
			os.WriteFile(path, raw, 0o644)
			r := openReader(t, ReaderOptions{CheckData: true}, path)
			size := uint64(len(tc.sample))
			if _, err := readRanges(r, []Range{{0, 0, size}}); !errors.Is(err, ErrChecksum) {
				t.Fatalf("whole sample: err = %v, want ErrChecksum", err)
			}
			got, err := readRanges(r, []Range{{0, 0, 10}})
			if !errors.Is(err, tc.partialErr) {
				t.Fatalf("partial range: err = %v, want %v", err, tc.partialErr)
			}
			if err == nil && !bytes.Equal(got, tc.sample[:10]) {
				t.Fatalf("partial range: got %q", got)
			}
		})
	}
}

// Random ranges over random samples, compressed or not, match slices of the samples.
func TestReadRangesRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	samples := randomSamples(rng, 60, 20000)
	for _, compression := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
		paths := rangeDataset(t, samples, 25, compression)
		for _, opts := range rangeReaderOptions {
			r := openReader(t, opts, paths...)
			for round := range 20 {
				ranges := make([]Range, rng.IntN(40))
				for k := range ranges {
					i := rng.IntN(len(samples))
					size := uint64(len(samples[i]))
					off := rng.Uint64N(size + 1)
					ranges[k] = Range{uint64(i), off, rng.Uint64N(size - off + 1)}
				}
				got, err := readRanges(r, ranges)
				if err != nil {
					t.Fatalf("%v %+v round %d: %v", compression, opts, round, err)
				}
				if !bytes.Equal(got, wantRanges(samples, ranges)) {
					t.Fatalf("%v %+v round %d: ranges %v read wrong bytes", compression, opts, round, ranges)
				}
			}
		}
	}
}
