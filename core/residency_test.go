package core

import (
	"bytes"
	"testing"
)

// A reader probes one sample of a batch for residency once batches have been warm for a
// while, and goes back to probing several, and to the engine, when a probe finds a page
// missing: the cold batch still arrives whole.
func TestResidencyProbesFollowTheStreak(t *testing.T) {
	samples := make([][]byte, 600)
	for i := range samples {
		samples[i] = bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 2048)
	}
	path := tempPath(t, "streak.ffr")
	writeSamples(t, path, samples, WriterOptions{})
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	warm := span(0, 64)
	for range warmStreak + 2 {
		if _, err := readSamples(r, warm); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.residentBatches.Load(); got < warmStreak {
		t.Fatalf("%d warm batches in a row counted, want >= %d", got, warmStreak)
	}
	evict(t, path) // the pages this reader mapped stay; samples 300.. never were
	cold := span(300, 364)
	if cached, _ := cachedPages(t, r, cold); cached != 0 {
		t.Skipf("the page cache kept %d pages of evicted samples (this file system ignores FADV_DONTNEED)", cached)
	}
	got, err := readSamples(r, cold)
	if err != nil {
		t.Fatal(err)
	}
	assertSamples(t, got, samples[300:364])
	if n := r.residentBatches.Load(); n != 0 {
		t.Fatalf("a cold batch left the warm count at %d", n)
	}
}
