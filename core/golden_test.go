package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The golden files were written by the reference implementation; MANIFEST.json gives the
// sha256 of every sample and what each damaged file must do.
type manifest struct {
	Files map[string]struct {
		N       uint64 `json:"n"`
		Samples []struct {
			Len    uint64 `json:"len"`
			SHA256 string `json:"sha256"`
		} `json:"samples"`
	} `json:"files"`
	Packed map[string]struct {
		SHA256 string `json:"sha256"`
	} `json:"packed.ffr"`
	Corrupt map[string]string `json:"corrupt"`
}

func loadManifest(t *testing.T) manifest {
	t.Helper()
	raw, err := os.ReadFile("testdata/MANIFEST.json")
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Files) == 0 || len(m.Corrupt) == 0 {
		t.Fatal("manifest lists no files")
	}
	return m
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestGoldenSamples(t *testing.T) {
	m := loadManifest(t)
	for name, want := range m.Files {
		for _, check := range []bool{true, false} {
			t.Run(name+map[bool]string{true: "/check", false: "/nocheck"}[check], func(t *testing.T) {
				r := openReader(t, ReaderOptions{CheckData: check}, filepath.Join("testdata", name))
				if r.Len() != want.N {
					t.Fatalf("Len = %d, want %d", r.Len(), want.N)
				}
				sizes := make([]uint64, r.Len())
				if err := r.Sizes(span(0, r.Len()), sizes); err != nil {
					t.Fatal(err)
				}
				for i, s := range readAll(t, r) {
					if sizes[i] != want.Samples[i].Len || sha(s) != want.Samples[i].SHA256 {
						t.Errorf("sample %d: len %d (Sizes %d) sha %s, want len %d sha %s",
							i, len(s), sizes[i], sha(s), want.Samples[i].Len, want.Samples[i].SHA256)
					}
				}
				if w := r.Warnings(); len(w) != 0 {
					t.Errorf("unexpected warnings %q", w)
				}
			})
		}
	}
}

// Rewriting a golden file's samples must reproduce it byte for byte.
func TestGoldenRewriteIsByteIdentical(t *testing.T) {
	m := loadManifest(t)
	for name := range m.Files {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join("testdata", name)
			r := openReader(t, ReaderOptions{CheckData: true}, src)
			out := tempPath(t, "copy.ffr")
			writeSamples(t, out, readAll(t, r), WriterOptions{})
			want, _ := os.ReadFile(src)
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("rewritten file differs from %s (%d vs %d bytes)", name, len(got), len(want))
			}
		})
	}
}

func TestGoldenDirectoryIsOneDataset(t *testing.T) {
	m := loadManifest(t)
	r := openReader(t, ReaderOptions{CheckData: true}, "testdata/multi")
	names := r.Files()
	var want []string
	for name := range m.Files {
		if strings.HasPrefix(name, "multi/") {
			want = append(want, filepath.Join("testdata", name))
		}
	}
	sort.Strings(want)
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("Files = %v, want %v", names, want)
	}
	var shas []string
	for k, name := range want {
		entry := m.Files[strings.TrimPrefix(name, "testdata/")]
		if r.FileCounts()[k] != entry.N {
			t.Errorf("FileCounts[%d] = %d, want %d", k, r.FileCounts()[k], entry.N)
		}
		for _, s := range entry.Samples {
			shas = append(shas, s.SHA256)
		}
	}
	if r.Len() != uint64(len(shas)) {
		t.Fatalf("Len = %d, want %d", r.Len(), len(shas))
	}
	// Read backwards so every lookup crosses files in the other direction too.
	indices := span(0, r.Len())
	for i, j := 0, len(indices)-1; i < j; i, j = i+1, j-1 {
		indices[i], indices[j] = indices[j], indices[i]
	}
	got, err := readSamples(r, indices)
	if err != nil {
		t.Fatal(err)
	}
	for k, i := range indices {
		if sha(got[k]) != shas[i] {
			t.Errorf("dataset sample %d differs", i)
		}
	}
}

func TestGoldenPackedRecords(t *testing.T) {
	m := loadManifest(t)
	r := openReader(t, ReaderOptions{CheckData: true}, "testdata/packed.ffr")
	names := make([]string, 0, len(m.Packed))
	for name := range m.Packed {
		names = append(names, name)
	}
	sort.Strings(names)
	if r.Len() != uint64(len(names))+1 {
		t.Fatalf("Len = %d, want %d files + the metadata record", r.Len(), len(names))
	}
	samples := readAll(t, r)
	for k, name := range names {
		if sha(samples[k]) != m.Packed[name].SHA256 {
			t.Errorf("record %d (%s) differs", k, name)
		}
	}
	if !bytes.HasPrefix(samples[len(names)], []byte("piouhjgbr")) {
		t.Errorf("last record does not start with the pack_folder magic")
	}
}

func TestGoldenDamagedFiles(t *testing.T) {
	m := loadManifest(t)
	for _, name := range []string{"corrupt_sample.ffr", "corrupt_header.ffr", "truncated.ffr",
		"truncated_header.ffr", "legacy_zero_checksum.ffr"} {
		if _, ok := m.Corrupt[name]; !ok {
			t.Fatalf("manifest does not describe %s", name)
		}
	}
	basic := m.Files["basic.ffr"]
	path := func(name string) string { return filepath.Join("testdata", name) }

	t.Run("corrupt_sample", func(t *testing.T) {
		r := openReader(t, ReaderOptions{CheckData: true}, path("corrupt_sample.ffr"))
		for i := uint64(0); i < r.Len(); i++ {
			got, err := readSamples(r, []uint64{i})
			if i == 2 {
				if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "sample 2") ||
					!strings.Contains(err.Error(), "corrupt_sample.ffr") {
					t.Fatalf("sample 2: err = %v, want a checksum error naming file and sample", err)
				}
				continue
			}
			if err != nil || sha(got[0]) != basic.Samples[i].SHA256 {
				t.Fatalf("sample %d: err %v or wrong bytes", i, err)
			}
		}
		bad, err := badIndices(r, 0, r.Len())
		if err != nil {
			t.Fatal(err)
		}
		if len(bad) != 1 || bad[0] != 2 {
			t.Fatalf("Verify reported %v, want [2]", bad)
		}
	})
	t.Run("corrupt_header", func(t *testing.T) {
		_, err := Open([]string{path("corrupt_header.ffr")}, ReaderOptions{CheckData: true})
		if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "metadata") {
			t.Fatalf("Open: err = %v, want a metadata checksum error", err)
		}
		r := openReader(t, ReaderOptions{}, path("corrupt_header.ffr"))
		_, err = badIndices(r, 0, r.Len())
		if !errors.Is(err, ErrChecksum) {
			t.Fatalf("Verify: err = %v, want a metadata checksum error", err)
		}
	})
	t.Run("truncated", func(t *testing.T) {
		for _, check := range []bool{true, false} {
			r := openReader(t, ReaderOptions{CheckData: check}, path("truncated.ffr"))
			size, _ := os.Stat(path("truncated.ffr"))
			good := 0
			for i := uint64(0); i < r.Len(); i++ {
				got, err := readSamples(r, []uint64{i})
				if err != nil {
					if !IsCorruption(err) {
						t.Fatalf("sample %d: err = %v, want a corruption error", i, err)
					}
					continue
				}
				if sha(got[0]) != basic.Samples[i].SHA256 {
					t.Fatalf("check=%v sample %d: wrong bytes returned instead of an error", check, i)
				}
				good++
			}
			if good == 0 || good == int(r.Len()) {
				t.Fatalf("check=%v: %d of %d samples read from a %d-byte file", check, good, r.Len(), size.Size())
			}
		}
	})
	t.Run("truncated_header", func(t *testing.T) {
		for _, check := range []bool{true, false} {
			_, err := Open([]string{path("truncated_header.ffr")}, ReaderOptions{CheckData: check})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated_header.ffr") {
				t.Fatalf("check=%v: err = %v, want ErrCorrupt naming the file", check, err)
			}
		}
	})
	t.Run("legacy_zero_checksum", func(t *testing.T) {
		r := openReader(t, ReaderOptions{CheckData: true}, path("legacy_zero_checksum.ffr"))
		if w := r.Warnings(); len(w) != 1 || !strings.Contains(w[0], "checksum is 0") {
			t.Fatalf("Warnings = %q, want one about the zero checksum", w)
		}
		for i, s := range readAll(t, r) {
			if sha(s) != basic.Samples[i].SHA256 {
				t.Fatalf("sample %d differs", i)
			}
		}
		if bad, err := badIndices(r, 0, r.Len()); err != nil || len(bad) != 0 {
			t.Fatal(err, bad)
		}
	})
}
