package core

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeColumn writes values (a multiple of width bytes) as a column file of perBlock values
// to a block and returns its layout.
func writeColumn(t testing.TB, path string, values []byte, width, perBlock uint64, opts WriterOptions) Column {
	t.Helper()
	c := Column{Values: uint64(len(values)) / width, Width: width, PerBlock: perBlock}
	var blocks [][]byte
	for at := uint64(0); at < uint64(len(values)); at += perBlock * width {
		blocks = append(blocks, values[at:min(at+perBlock*width, uint64(len(values)))])
	}
	writeSamples(t, path, blocks, opts)
	return c
}

// Values gathered, ranged and read whole are the values written, for column lengths at and
// around block boundaries, each compression, with checks on and off, local and remote.
func TestColumnRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 1))
	const perBlock = 7
	for _, comp := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
		for _, n := range []uint64{0, 1, perBlock - 1, perBlock, perBlock + 1, 2 * perBlock, 3*perBlock + 2} {
			for _, width := range []uint64{1, 4, 12} {
				t.Run(fmt.Sprintf("%v/n%d/w%d", comp, n, width), func(t *testing.T) {
					values := make([]byte, n*width)
					for k := range values { // compressible: runs of a few byte values
						values[k] = byte(rng.IntN(3))
					}
					path := tempPath(t, "col.ffr")
					c := writeColumn(t, path, values, width, perBlock, WriterOptions{Compression: comp})
					for _, check := range []bool{false, true} {
						r := openReader(t, ReaderOptions{CheckData: check}, path)
						assertColumnReads(t, r, c, values, rng)
					}
				})
			}
		}
	}
}

// assertColumnReads reads c through r every way (all ranges of a short column, random
// gathers with duplicates, the whole column) and compares with values.
func assertColumnReads(t *testing.T, r *Reader, c Column, values []byte, rng *rand.Rand) {
	t.Helper()
	w := c.Width
	for start := uint64(0); start <= c.Values; start++ {
		for end := start; end <= c.Values && end <= start+3*c.PerBlock; end++ {
			got := make([]byte, (end-start)*w)
			if err := r.ReadValueRange(c, start, end-start, got); err != nil {
				t.Fatalf("range [%d, %d): %v", start, end, err)
			}
			if !bytes.Equal(got, values[start*w:end*w]) {
				t.Fatalf("range [%d, %d): wrong values", start, end)
			}
		}
	}
	if c.Values == 0 {
		return
	}
	for range 20 {
		indices := make([]uint64, rng.IntN(40))
		for k := range indices {
			indices[k] = rng.Uint64N(c.Values)
		}
		got := make([]byte, uint64(len(indices))*w)
		if err := r.ReadValues(c, indices, got); err != nil {
			t.Fatal(err)
		}
		for k, i := range indices {
			if !bytes.Equal(got[uint64(k)*w:uint64(k+1)*w], values[i*w:(i+1)*w]) {
				t.Fatalf("value %d (index %d of %v): wrong bytes", i, k, indices)
			}
		}
	}
}

// Arguments that cannot be served are typed errors, and nothing is written to dst.
func TestColumnBadArguments(t *testing.T) {
	path := tempPath(t, "col.ffr")
	c := writeColumn(t, path, bytes.Repeat([]byte{1, 2, 3, 4}, 10), 4, 4, WriterOptions{})
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	dst := make([]byte, 64)
	cases := []struct {
		name string
		err  error
		call func() error
	}{
		{"index past the end", ErrIndex, func() error { return r.ReadValues(c, []uint64{3, 10}, dst) }},
		{"range past the end", ErrIndex, func() error { return r.ReadValueRange(c, 8, 3, dst) }},
		{"range start past the end", ErrIndex, func() error { return r.ReadValueRange(c, 11, 0, dst) }},
		{"short buffer", io.ErrShortBuffer, func() error { return r.ReadValues(c, make([]uint64, 17), dst) }},
		{"short buffer, range", io.ErrShortBuffer, func() error { return r.ReadValueRange(c, 0, 10, dst[:39]) }},
		{"zero width", ErrInvalid, func() error { return r.ReadValues(Column{10, 0, 4}, nil, dst) }},
		{"zero per block", ErrInvalid, func() error { return r.ReadValues(Column{10, 4, 0}, nil, dst) }},
		{"huge blocks", ErrInvalid, func() error { return r.ReadValues(Column{10, 1 << 20, 1 << 20}, nil, dst) }},
		{"another block count", ErrCorrupt, func() error { return r.ReadValues(Column{10, 4, 5}, nil, dst) }},
		{"values that do not fill the file", ErrCorrupt, func() error { return r.ReadValueRange(Column{13, 4, 4}, 0, 13, dst) }},
	}
	for _, tc := range cases {
		clear(dst)
		if err := tc.call(); !errors.Is(err, tc.err) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.err)
		}
		if !bytes.Equal(dst, make([]byte, 64)) {
			t.Errorf("%s: wrote to dst", tc.name)
		}
	}
}

// A damaged block is ErrChecksum naming the file, the block and the values it holds, by
// every read that touches it and by none that does not; a block of the wrong size is
// ErrCorrupt, named the same way.
func TestColumnDamagedBlock(t *testing.T) {
	path := tempPath(t, "col.ffr")
	values := make([]byte, 10*8)
	c := writeColumn(t, path, values, 8, 4, WriterOptions{})
	header, _ := headerSize(c.Blocks())
	flipBit(t, path, int64(header)+4*8+3) // in block 1: values 4 to 7
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	dst := make([]byte, 80)
	for name, call := range map[string]func() error{
		"gather": func() error { return r.ReadValues(c, []uint64{0, 6}, dst) },
		"range":  func() error { return r.ReadValueRange(c, 5, 1, dst) },
		"whole":  func() error { return r.ReadValueRange(c, 0, 10, dst) },
	} {
		err := call()
		if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "column block 1: values 4 to 7") ||
			!strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := r.ReadValues(c, []uint64{0, 9, 3}, dst); err != nil {
		t.Errorf("blocks 0 and 2 are intact: %v", err)
	}
	unchecked := openReader(t, ReaderOptions{}, path)
	if err := unchecked.ReadValueRange(c, 0, 10, dst); err != nil {
		t.Errorf("without checks: %v", err)
	}

	short := tempPath(t, "short.ffr")
	writeSamples(t, short, [][]byte{make([]byte, 32), make([]byte, 24), make([]byte, 16)}, WriterOptions{})
	rs := openReader(t, ReaderOptions{CheckData: true}, short)
	for _, err := range []error{rs.ReadValues(c, []uint64{5}, dst), rs.ReadValueRange(c, 0, 10, dst)} {
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "column block 1: values 4 to 7") {
			t.Errorf("short block: %v", err)
		}
	}
}

// A big gather over many blocks, in random order with duplicates, and a whole column
// read in parallel parts, agree with the values.
func TestColumnLargeReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 2))
	values := make([]byte, 300_000*4)
	fillRandom(rng, values)
	path := tempPath(t, "col.ffr")
	c := writeColumn(t, path, values, 4, 1024, WriterOptions{})
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	got := make([]byte, len(values))
	if err := r.ReadValueRange(c, 0, c.Values, got); err != nil || !bytes.Equal(got, values) {
		t.Fatalf("whole column: %v", err)
	}
	indices := make([]uint64, 100_000)
	for k := range indices {
		indices[k] = rng.Uint64N(c.Values)
	}
	if err := r.ReadValues(c, indices, got); err != nil {
		t.Fatal(err)
	}
	for k, i := range indices {
		if !bytes.Equal(got[k*4:k*4+4], values[i*4:i*4+4]) {
			t.Fatalf("value %d: wrong bytes", i)
		}
	}
}

// FuzzColumnBlocks reads arbitrary files as columns of arbitrary layouts: nothing may
// panic, and every failure is one of the package's typed errors.
func FuzzColumnBlocks(f *testing.F) {
	dir := f.TempDir()
	for k, comp := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
		path := filepath.Join(dir, fmt.Sprintf("%d.ffr", k))
		writeColumn(f, path, bytes.Repeat([]byte("abcdefgh"), 40), 8, 16, WriterOptions{Compression: comp})
		raw, _ := os.ReadFile(path)
		f.Add(raw, uint64(40), uint64(8), uint64(16), uint64(3), uint64(30))
	}
	scratch := memoryDir(f)
	f.Fuzz(func(t *testing.T, raw []byte, values, width, perBlock, start, count uint64) {
		path := filepath.Join(scratch, "f.ffr")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		c := Column{Values: values % (1 << 20), Width: width % 64, PerBlock: perBlock % 4096}
		for _, check := range []bool{false, true} {
			r, err := Open([]string{path}, ReaderOptions{CheckData: check})
			if err != nil {
				continue
			}
			dst := make([]byte, 1<<16)
			typed(t, r.ReadValueRange(c, start%(c.Values+1), count%2048, dst))
			typed(t, r.ReadValues(c, []uint64{start % (c.Values + 1), count % (c.Values + 1), 0}, dst))
			_ = r.Close()
		}
	})
}

func typed(t *testing.T, err error) {
	if err != nil && !IsCorruption(err) && !errors.Is(err, ErrIndex) && !errors.Is(err, ErrInvalid) {
		t.Fatalf("untyped error: %v", err)
	}
}

// BenchmarkColumnGather: 64 random values of a column of a million float32, 1024 to a block.
func BenchmarkColumnGather(b *testing.B) {
	rng := rand.New(rand.NewPCG(34, 3))
	values := make([]byte, 1_000_000*4)
	fillRandom(rng, values)
	path := tempPath(b, "col.ffr")
	c := writeColumn(b, path, values, 4, 1024, WriterOptions{})
	for _, check := range []bool{false, true} {
		b.Run(fmt.Sprintf("check=%v", check), func(b *testing.B) {
			r := openReader(b, ReaderOptions{CheckData: check}, path)
			indices := make([]uint64, 64)
			dst := make([]byte, 64*4)
			for b.Loop() {
				for k := range indices {
					indices[k] = rng.Uint64N(c.Values)
				}
				if err := r.ReadValues(c, indices, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
