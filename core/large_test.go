package core

import (
	"errors"
	"io"
	"math"
	"os"
	"testing"

	"github.com/ffrecord/ffrecord/core/internal/engine"
)

const gib = uint64(1) << 30

// fakeFile is a dataFile over an in-memory header that claims a file of size bytes, to
// drive offset arithmetic past 4 GiB without writing such a file.
func fakeFile(size uint64, offsets ...uint64) *dataFile {
	n := uint64(len(offsets))
	header, _ := headerSize(n)
	data := make([]byte, header)
	le.PutUint64(data[metaChecksumSize:], n)
	for i, off := range offsets {
		le.PutUint64(data[offsetPos(n, uint64(i)):], off)
	}
	return &dataFile{path: "fake.ffr", size: size, data: data, stored: n, header: header, fd: -1, directFd: -1}
}

func TestSpansPastFourGiB(t *testing.T) {
	header, _ := headerSize(3)
	f := fakeFile(9*gib, header, header+5*gib, header+5*gib)
	wantSpans := [][2]uint64{{header, header + 5*gib}, {header + 5*gib, header + 5*gib}, {header + 5*gib, 9 * gib}}
	for i, want := range wantSpans {
		off, end, err := f.span(uint64(i))
		if err != nil || off != want[0] || end != want[1] {
			t.Errorf("span(%d) = %d, %d, %v; want %d, %d", i, off, end, err, want[0], want[1])
		}
	}
	var warnings []string
	if err := f.checkHeader(&warnings); err != nil || len(warnings) != 0 {
		t.Fatalf("checkHeader: %v %q", err, warnings)
	}
	var it batchItem
	r := &Reader{}
	if err := r.plan(&it, f, 0, 0); err != nil || it.size != 5*gib {
		t.Fatalf("plan: size %d, err %v; want 5 GiB", it.size, err)
	}
}

func TestSpansOutsideTheFile(t *testing.T) {
	header, _ := headerSize(3)
	for name, offsets := range map[string][]uint64{
		"inside header":  {header - 1, header, header},
		"decreasing":     {header, header + 10, header + 5},
		"past end":       {header, header + 200, header + 300},
		"wraps around":   {header, math.MaxUint64, header},
		"past end, huge": {header, header, 5 * gib},
	} {
		t.Run(name, func(t *testing.T) {
			f := fakeFile(header+100, offsets...)
			failed := false
			for i := range uint64(3) {
				off, end, err := f.span(i)
				if err != nil {
					if !errors.Is(err, ErrCorrupt) {
						t.Fatalf("span(%d): %v, want ErrCorrupt", i, err)
					}
					failed = true
					continue
				}
				if off < header || end > f.size || off > end {
					t.Fatalf("span(%d) = %d..%d escapes the file", i, off, end)
				}
			}
			if !failed {
				t.Fatal("no span was refused")
			}
		})
	}
}

func TestHeaderSizeOverflow(t *testing.T) {
	if _, ok := headerSize(maxSamples); !ok {
		t.Fatal("largest count refused")
	}
	if _, ok := headerSize(maxSamples + 1); ok {
		t.Fatal("overflowing count accepted")
	}
	f := fakeFile(100)
	le.PutUint64(f.data[metaChecksumSize:], maxSamples+1)
	if err := f.parseHeader(false, new([]string)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("header claiming 2^64/12 samples: %v", err)
	}
}

func TestHeaderRecordsOffsetsPastFourGiB(t *testing.T) {
	f, err := os.Create(tempPath(t, "h"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rel := []uint64{0, 3 * gib, 7 * gib}
	if err := writeHeader(f, []uint32{1, 2, 3}, rel, nil); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(f.Name())
	header, _ := headerSize(3)
	for i, want := range rel {
		if got := le.Uint64(raw[offsetPos(3, uint64(i)):]); got != header+want {
			t.Errorf("offset %d = %d, want %d", i, got, header+want)
		}
	}
}

// Samples larger than one system call are split: shrink the limit to see it happen.
func TestLargeSamplesAreSplit(t *testing.T) {
	saved := engine.MaxChunk
	engine.MaxChunk = 4096
	defer func() { engine.MaxChunk = saved }()
	samples := [][]byte{benchSample(directWriteMin + 12345), benchSample(100)}
	path := tempPath(t, "big.ffr")
	writeSamples(t, path, samples, WriterOptions{})
	unknown := tempPath(t, "u.ffr")
	writeDeclared(t, unknown, UnknownCount, samples, WriterOptions{})
	r := openReader(t, ReaderOptions{CheckData: true}, path, unknown)
	assertSamples(t, readAll(t, r), append(samples, samples...))
	if bad, err := badIndices(r, 0, r.Len()); err != nil || len(bad) != 0 {
		t.Fatalf("Verify: %v, bad %v", err, bad)
	}
}

// Original sizes in an extension record are 64-bit; their sum must not wrap.
func TestExtensionSizesPastFourGiB(t *testing.T) {
	c := &compressor{sizes: []uint64{5 * gib, math.MaxUint64 - gib}, compressions: []byte{compressionRaw, compressionRaw}}
	path := tempPath(t, "x.ffr")
	writeSamples(t, path, [][]byte{[]byte("a"), []byte("b"), c.record()}, WriterOptions{})
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	sizes := make([]uint64, 2)
	if err := r.Sizes([]uint64{0, 1}, sizes); err != nil || sizes[0] != 5*gib || sizes[1] != math.MaxUint64-gib {
		t.Fatalf("Sizes = %v, %v", sizes, err)
	}
	if err := r.ReadBatch([]uint64{0, 1}, nil, sizes); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("batch whose size wraps: %v, want ErrCorrupt", err)
	}
	if err := r.ReadBatch([]uint64{0}, make([]byte, 10), sizes); !errors.Is(err, io.ErrShortBuffer) {
		t.Fatalf("5 GiB sample into 10 bytes: %v, want io.ErrShortBuffer", err)
	}
	if bad, err := badIndices(r, 0, 2); err != nil || len(bad) != 2 {
		t.Fatalf("Verify: %v, bad %v; want both samples bad (sizes disagree with the data)", err, bad)
	}
}
