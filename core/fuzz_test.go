package core

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// readsStayInside opens raw as a file with and without checks and reads every sample
// one by one, in one batch and as one span (which must agree with the batch), then
// verifies it. Nothing may panic, and for a file without
// an extension record every sample returned must be exactly the bytes its offsets
// delimit inside the file, computed here independently.
func readsStayInside(t *testing.T, dir string, raw []byte) {
	path := filepath.Join(dir, "f.ffr")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, check := range []bool{false, true} {
		r, err := Open([]string{path}, ReaderOptions{CheckData: check})
		if err != nil {
			continue
		}
		stored := le.Uint64(raw[4:])
		plain := r.Len() == stored
		for i := range min(r.Len(), 2000) {
			got, err := readSamples(r, []uint64{i})
			if err != nil || !plain {
				continue
			}
			off := le.Uint64(raw[offsetPos(stored, i):])
			end := uint64(len(raw))
			if i+1 < stored {
				end = le.Uint64(raw[offsetPos(stored, i+1):])
			}
			header, _ := headerSize(stored)
			if off < header || off > end || end > uint64(len(raw)) || !bytes.Equal(got[0], raw[off:end]) {
				t.Fatalf("check=%v sample %d: returned %d bytes that are not the file's bytes %d..%d",
					check, i, len(got[0]), off, end)
			}
		}
		n := min(r.Len(), 2000)
		batch, batchErr := readSamples(r, span(0, n))
		spanned, spanErr := readSpan(r, 0, n)
		if (batchErr == nil) != (spanErr == nil) {
			t.Fatalf("check=%v: a batch of every sample: %v; their span: %v", check, batchErr, spanErr)
		}
		if batchErr == nil {
			assertSamples(t, spanned, batch)
		}
		_, _ = badIndices(r, 0, min(r.Len(), 2000))
		_ = r.Close()
	}
}

// FuzzReader is seeded with the golden files cut to their first 2 KiB (the fuzzer slows to
// a crawl on inputs of hundreds of KiB) and small files written here.
func FuzzReader(f *testing.F) {
	for _, name := range []string{"basic.ffr", "corrupt_header.ffr", "truncated.ffr",
		"truncated_header.ffr", "legacy_zero_checksum.ffr", "packed.ffr", "multi/PART_00001.ffr"} {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw[:min(len(raw), 2048)])
	}
	dir := f.TempDir()
	for _, comp := range []Compression{CompressNone, CompressLZ4} {
		path := filepath.Join(dir, comp.String()+".ffr")
		writeSamples(f, path, [][]byte{bytes.Repeat([]byte("ab"), 300), {}, []byte("xyz")}, WriterOptions{Compression: comp})
		raw, _ := os.ReadFile(path)
		f.Add(raw)
	}
	scratch := memoryDir(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		readsStayInside(t, scratch, raw)
	})
}

// Damaged copies of golden and compressed files, read with checks off and on.
func TestDamagedInputsNeverEscape(t *testing.T) {
	basic, err := os.ReadFile("testdata/basic.ffr")
	if err != nil {
		t.Fatal(err)
	}
	path := tempPath(t, "lz4.ffr")
	writeSamples(t, path, randomSamples(rand.New(rand.NewPCG(4, 4)), 20, 3000), WriterOptions{Compression: CompressLZ4})
	compressed, _ := os.ReadFile(path)
	rng := rand.New(rand.NewPCG(12, 12))
	scratch := memoryDir(t)
	for name, raw := range map[string][]byte{"basic": basic, "lz4": compressed} {
		t.Run(name+"/truncated", func(t *testing.T) {
			for _, cut := range []int{0, 5, 11, 12, 13, 100, 311, 312, 313, len(raw) / 2, len(raw) - 1} {
				readsStayInside(t, scratch, raw[:min(cut, len(raw))])
			}
		})
		t.Run(name+"/flipped", func(t *testing.T) {
			for range 30 {
				bad := bytes.Clone(raw)
				for range 1 + rng.IntN(3) {
					// Most flips land in the header, where they matter most.
					pos := rng.IntN(min(len(bad), 400))
					if rng.IntN(4) == 0 {
						pos = rng.IntN(len(bad))
					}
					bad[pos] ^= byte(1 << rng.IntN(8))
				}
				readsStayInside(t, scratch, bad)
			}
		})
	}
}
