package engine

import (
	"os"
	"path/filepath"
	"testing"
)

// Samples of a batch that share aligned blocks, in any order, are read as one aligned
// O_DIRECT span; samples blocks apart are not.
func TestDirectExtentsMergeStraddlingSamples(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "d"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	align, _ := directAlignment(fd)
	buf := func(n int64) []byte { return make([]byte, n) }
	reqs := []Request{
		{FD: fd, Off: align + 100, Buf: buf(align)},      // straddles blocks 1 and 2
		{FD: fd, Off: 10, Buf: buf(align - 10)},          // block 0, up to block 1
		{FD: fd, Off: 2*align + 5, Buf: buf(20)},         // inside block 2
		{FD: fd, Off: 40 * align, Buf: buf(align + 1)},   // far away: its own span
		{FD: fd, Off: 41*align + 1, Buf: buf(align / 2)}, // shares block 41 with the one before
	}
	extents := directExtents(reqs)
	if len(extents) != 2 {
		t.Fatalf("%d extents, want 2: %+v", len(extents), extents)
	}
	for k, want := range []struct {
		start, end int64
		parts      int
	}{{0, 3 * align, 3}, {40 * align, 42 * align, 2}} {
		e := extents[k]
		if e.start != want.start || e.end != want.end || len(e.parts) != want.parts {
			t.Fatalf("extent %d covers [%d, %d) with %d parts, want [%d, %d) with %d",
				k, e.start, e.end, len(e.parts), want.start, want.end, want.parts)
		}
	}
}
