package core

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Closing a reader of a large file leaves the unmapping to another goroutine: the samples it
// read stay right until Close, and the file's mapping is gone soon after.
func TestCloseUnmapsALargeFileAside(t *testing.T) {
	sample := make([]byte, 1<<20)
	for i := range sample {
		sample[i] = byte(i * 7)
	}
	n := unmapAsideBytes>>20 + 1
	path := filepath.Join(t.TempDir(), "large.ffr")
	writeSamples(t, path, slices.Repeat([][]byte{sample}, n), WriterOptions{})
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	dst := make([]byte, len(sample))
	sizes := make([]uint64, 1)
	for i := range uint64(n) {
		if err := r.ReadBatch([]uint64{i}, dst, sizes); err != nil {
			t.Fatal(err)
		}
	}
	if !mapsName(t, path) {
		t.Fatalf("%s is not mapped while the reader is open", path)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); mapsName(t, path); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s is still mapped 10 s after Close", path)
		}
	}
}

// mapsName reports whether a mapping of this process names path.
func mapsName(t *testing.T, path string) bool {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(maps), path)
}
