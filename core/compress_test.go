package core

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"testing"
)

// baseLayout parses a file with nothing but the base format's rules, as the reference
// reader does, and returns its stored samples. It uses the standard library's CRC so it
// shares no code with the package.
func baseLayout(t *testing.T, path string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(raw[4:12])
	header := 12 + 12*n
	if crc32.ChecksumIEEE(raw[4:header]) != binary.LittleEndian.Uint32(raw) {
		t.Fatal("metadata checksum does not match")
	}
	samples := make([][]byte, n)
	for i := uint64(0); i < n; i++ {
		off := binary.LittleEndian.Uint64(raw[12+4*n+8*i:])
		end := uint64(len(raw))
		if i+1 < n {
			end = binary.LittleEndian.Uint64(raw[12+4*n+8*(i+1):])
		}
		if (i == 0 && off != header) || off > end || end > uint64(len(raw)) {
			t.Fatalf("sample %d spans %d..%d in a %d-byte file with a %d-byte header", i, off, end, len(raw), header)
		}
		samples[i] = raw[off:end]
		if crc32.ChecksumIEEE(samples[i]) != binary.LittleEndian.Uint32(raw[12+4*i:]) {
			t.Fatalf("sample %d: checksum does not match", i)
		}
	}
	return samples
}

func TestCompressedFileFollowsTheBaseFormat(t *testing.T) {
	for _, tc := range []struct {
		compression Compression
		perSample   byte
	}{{CompressLZ4, compressionLZ4}, {CompressZstd, compressionZstd}} {
		t.Run(tc.compression.String(), func(t *testing.T) { testCompressedFile(t, tc.compression, tc.perSample) })
	}
}

func testCompressedFile(t *testing.T, compression Compression, perSample byte) {
	rng := rand.New(rand.NewPCG(11, 11))
	samples := randomSamples(rng, 200, 40000)
	// Small compressible samples too: Zstandard frames of a few hundred bytes or less
	// do not declare their size.
	samples = append(samples, nil, bytes.Repeat([]byte{7}, 3<<20), bytes.Repeat([]byte("ab"), 40))
	path := tempPath(t, "c.ffr")
	writeSamples(t, path, samples, WriterOptions{Compression: compression})

	stored := baseLayout(t, path)
	if len(stored) != len(samples)+1 {
		t.Fatalf("%d stored samples, want %d plus the extension record", len(stored), len(samples))
	}
	rec := stored[len(samples)]
	if !bytes.HasPrefix(rec, []byte(extMagic)) {
		t.Fatal("last stored sample is not the extension record")
	}
	raw, compressed := 0, 0
	for i, s := range samples {
		switch got := rec[extSizesAt+8*len(samples)+i]; {
		case got == compressionRaw && bytes.Equal(stored[i], s):
			raw++
		case got == perSample && len(stored[i]) < len(s):
			compressed++
		default:
			t.Fatalf("sample %d: compression %d, stored %d bytes for %d", i, got, len(stored[i]), len(s))
		}
		if got := binary.LittleEndian.Uint64(rec[extSizesAt+8*i:]); got != uint64(len(s)) {
			t.Fatalf("sample %d: recorded size %d, want %d", i, got, len(s))
		}
	}
	if raw == 0 || compressed == 0 {
		t.Fatalf("%d raw and %d compressed samples: want both kinds", raw, compressed)
	}

	r := openReader(t, ReaderOptions{CheckData: true}, path)
	if r.Len() != uint64(len(samples)) {
		t.Fatalf("Len = %d, want %d", r.Len(), len(samples))
	}
	sizes := make([]uint64, len(samples))
	if err := r.Sizes(span(0, r.Len()), sizes); err != nil {
		t.Fatal(err)
	}
	for i, s := range samples {
		if sizes[i] != uint64(len(s)) {
			t.Fatalf("Sizes[%d] = %d, want %d", i, sizes[i], len(s))
		}
	}
	assertSamples(t, readAll(t, r), samples)
}

func TestCompressionShrinksCompressibleData(t *testing.T) {
	sample := bytes.Repeat([]byte("the same words again and again, "), 4096)
	dir := t.TempDir()
	plain := dir + "/p.ffr"
	writeSamples(t, plain, [][]byte{sample, sample}, WriterOptions{})
	a, _ := os.Stat(plain)
	for _, compression := range []Compression{CompressLZ4, CompressZstd} {
		packed := dir + "/" + compression.String() + ".ffr"
		writeSamples(t, packed, [][]byte{sample, sample}, WriterOptions{Compression: compression})
		b, _ := os.Stat(packed)
		if b.Size()*10 > a.Size() {
			t.Fatalf("%v: compressed file is %d bytes, plain %d: want at least 10x smaller", compression, b.Size(), a.Size())
		}
	}
}

// A damaged Zstandard frame is reported as corrupt whatever part of it is hit: the frame
// header's declared size, or the compressed data (checked with and without CheckData).
func TestDamagedZstdFrame(t *testing.T) {
	sample := bytes.Repeat([]byte("zstd frame contents "), 500)
	for _, tc := range []struct {
		name string
		at   func(stored []byte) int
	}{
		{"declared size", func([]byte) int { return 5 }},
		{"compressed data", func(stored []byte) int { return len(stored) - 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tempPath(t, "z.ffr")
			writeSamples(t, path, [][]byte{sample}, WriterOptions{Compression: CompressZstd})
			raw, _ := os.ReadFile(path)
			stored := baseLayout(t, path)[0]
			sampleAt := 12 + 12*2
			raw[sampleAt+tc.at(stored)] ^= 0x5a
			os.WriteFile(path, raw, 0o644)
			r := openReader(t, ReaderOptions{}, path)
			if _, err := readSamples(r, []uint64{0}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

// A user sample that merely starts like an extension record stays an ordinary sample.
func TestMagicInUserDataIsNotAnExtension(t *testing.T) {
	lookalike := append([]byte(extMagic), make([]byte, 40)...)
	path := tempPath(t, "m.ffr")
	samples := [][]byte{[]byte("a"), lookalike}
	writeSamples(t, path, samples, WriterOptions{})
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	assertSamples(t, readAll(t, r), samples)
}

func TestDamagedExtensionRecord(t *testing.T) {
	path := tempPath(t, "d.ffr")
	samples := [][]byte{bytes.Repeat([]byte("abc"), 100), []byte("xyz")}
	writeSamples(t, path, samples, WriterOptions{Compression: CompressLZ4})
	raw, _ := os.ReadFile(path)
	stored := baseLayout(t, path)
	recAt := len(raw) - len(stored[len(stored)-1])

	t.Run("record checksum", func(t *testing.T) {
		bad := bytes.Clone(raw)
		bad[recAt+extSizesAt] ^= 1 // the first original size
		os.WriteFile(path, bad, 0o644)
		for _, check := range []bool{true, false} {
			if _, err := Open([]string{path}, ReaderOptions{CheckData: check}); !errors.Is(err, ErrChecksum) {
				t.Fatalf("check=%v: err = %v, want ErrChecksum", check, err)
			}
		}
	})
	t.Run("compressed sample", func(t *testing.T) {
		bad := bytes.Clone(raw)
		bad[12+12*3+2] ^= 0x40 // inside the first (compressed) sample
		os.WriteFile(path, bad, 0o644)
		r := openReader(t, ReaderOptions{CheckData: true}, path)
		if _, err := readSamples(r, []uint64{0}); !errors.Is(err, ErrChecksum) {
			t.Fatalf("err = %v, want ErrChecksum", err)
		}
		reported, err := badIndices(r, 0, r.Len())
		if err != nil {
			t.Fatal(err)
		}
		if len(reported) != 1 || reported[0] != 0 {
			t.Fatalf("Verify reported %v, want [0]", reported)
		}
	})
}
