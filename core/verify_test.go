package core

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

// damagedFile writes n samples of size bytes and flips a byte inside each sample of bad.
func damagedFile(t *testing.T, name string, n, size int, bad ...int) string {
	t.Helper()
	path := tempPath(t, name)
	samples := make([][]byte, n)
	for i := range samples {
		samples[i] = []byte(strings.Repeat(fmt.Sprint(i%10), size))
	}
	writeSamples(t, path, samples, WriterOptions{})
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	header, _ := headerSize(uint64(n))
	for _, i := range bad {
		raw[header+uint64(i*size)] ^= 0xFF
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestVerifyReportsWhy: each bad sample comes with the reader's own words for it, naming
// the file and the sample, and the dataset index when the dataset has several files.
func TestVerifyReportsWhy(t *testing.T) {
	first := damagedFile(t, "a.ffr", 5, 10, 3)
	second := damagedFile(t, "b.ffr", 4, 10, 1)
	r := openReader(t, ReaderOptions{}, first, second)
	var got []BadSample
	if err := r.Verify(0, r.Len(), func(b BadSample) bool { got = append(got, b); return true }); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		index     uint64
		fragments []string
	}{
		{3, []string{first + ": sample 3: checksum mismatch: stored 0x"}},
		{6, []string{second + ": sample 1: checksum mismatch: stored 0x", "(sample 6 of the dataset)"}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d bad samples, want %d: %v", len(got), len(want), got)
	}
	for k, w := range want {
		if got[k].Index != w.index || !errors.Is(got[k].Err, ErrChecksum) {
			t.Errorf("bad sample %d: %d %v, want index %d and ErrChecksum", k, got[k].Index, got[k].Err, w.index)
		}
		for _, f := range w.fragments {
			if !strings.Contains(got[k].Err.Error(), f) {
				t.Errorf("%q does not mention %q", got[k].Err, f)
			}
		}
	}
}

// TestVerifyStopsWhereAsked: a caller that stops at a bad sample gets it again first from
// its index on, so pages of any size give every bad sample exactly once.
func TestVerifyStopsWhereAsked(t *testing.T) {
	bad := []int{0, 1, 2, 40, 41, 97, 99}
	r := openReader(t, ReaderOptions{}, damagedFile(t, "x.ffr", 100, 30, bad...))
	want := make([]uint64, len(bad))
	for k, i := range bad {
		want[k] = uint64(i)
	}
	for _, page := range []int{1, 2, 3, 100} {
		t.Run(fmt.Sprintf("page=%d", page), func(t *testing.T) {
			var all []uint64
			for next, calls := uint64(0), 0; next < r.Len(); calls++ {
				if calls > len(bad)+1 {
					t.Fatalf("no end after %d calls", calls)
				}
				var got []uint64
				stop := r.Len()
				err := r.Verify(next, r.Len()-next, func(b BadSample) bool {
					if len(got) == page {
						stop = b.Index
						return false
					}
					got = append(got, b.Index)
					return true
				})
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, got...)
				next = stop
			}
			if !slices.Equal(all, want) {
				t.Fatalf("pages of %d gave %v, want %v", page, all, want)
			}
		})
	}
}

// TestVerifyRangeBounds: a range reaching past the dataset is refused however its ends
// overflow 64 bits; every range inside is accepted.
func TestVerifyRangeBounds(t *testing.T) {
	r := openReader(t, ReaderOptions{}, damagedFile(t, "x.ffr", 4, 3, 2))
	const huge = math.MaxUint64
	for _, tt := range []struct {
		start, count uint64
		bad          int // -1: refused
	}{
		{0, 4, 1}, {2, 1, 1}, {3, 1, 0}, {4, 0, 0}, {0, 0, 0},
		{0, 5, -1}, {4, 1, -1}, {5, 0, -1}, {1, huge, -1}, {huge, 1, -1},
		{huge, huge, -1}, {huge, 0, -1}, {0, huge, -1}, {2, huge - 1, -1},
	} {
		t.Run(fmt.Sprintf("%d+%d", tt.start, tt.count), func(t *testing.T) {
			bad, err := badIndices(r, tt.start, tt.count)
			switch {
			case tt.bad < 0 && !errors.Is(err, ErrIndex):
				t.Fatalf("err = %v, bad %v; want ErrIndex", err, bad)
			case tt.bad >= 0 && (err != nil || len(bad) != tt.bad):
				t.Fatalf("err = %v, bad %v; want %d bad samples", err, bad, tt.bad)
			}
		})
	}
}

// TestVerifyDamagedMetadataEveryTime: the metadata is checked once per reader, and every
// Verify over the file still reports it, after checking the samples.
func TestVerifyDamagedMetadataEveryTime(t *testing.T) {
	r := openReader(t, ReaderOptions{}, "testdata/corrupt_header.ffr")
	for range 3 {
		if _, err := badIndices(r, 0, 1); !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "metadata") {
			t.Fatalf("err = %v, want the metadata checksum error", err)
		}
	}
}
