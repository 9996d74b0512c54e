package core

import (
	"errors"
	"os"
	"testing"
)

// A file cut short while a reader has it mapped gives errors, never a crash: reads that
// find the pages gone from the mapping fault (SIGBUS), which the guard turns into
// ErrCorrupt, and reads through the engine come up short.
func TestFileTruncatedWhileOpen(t *testing.T) {
	path := tempPath(t, "t.ffr")
	samples := [][]byte{benchSample(10000), benchSample(20000), benchSample(30000)}
	writeSamples(t, path, samples, WriterOptions{})
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	assertSamples(t, readAll(t, r), samples)
	header, _ := headerSize(3)
	if err := os.Truncate(path, int64(header)+100); err != nil {
		t.Fatal(err)
	}
	for _, i := range []uint64{1, 2} {
		if _, err := readSamples(r, []uint64{i}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("sample %d after truncation: err = %v, want ErrCorrupt", i, err)
		}
	}
	f := r.files[0]
	err := withFaultGuard(func() (string, int64) { return f.path, 2 }, func() error {
		faultSink = f.data[f.size-1] // mapped, but past the end of the file now
		return nil
	})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("direct access past the new end: err = %v, want ErrCorrupt", err)
	}
	if _, err := badIndices(r, 0, 3); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify after truncation: err = %v, want ErrCorrupt", err)
	}
}

// faultSink keeps the compiler from dropping the load that must fault.
var faultSink byte
