package abi

import (
	"bytes"
	"path/filepath"
	"testing"
	"unsafe"
)

// The calls of the I/O path: vectored writes, verified identities and prefetch, with
// their bad arguments.
func TestWriteVectorsVerifiedAndPrefetch(t *testing.T) {
	noLeaks(t)
	path := filepath.Join(t.TempDir(), "v.ffr")
	samples := [][]byte{bytes.Repeat([]byte("a"), 100<<10), nil, []byte("bc"), bytes.Repeat([]byte("d"), 70<<10)}
	var w int64
	must(t, func() int32 { return WriterCreate(cstr(path), uint64(len(samples)), 0, unsafe.Pointer(&w)) })
	data := make([]unsafe.Pointer, len(samples))
	sizes := make([]uint64, len(samples))
	for k, s := range samples {
		data[k], sizes[k] = ptr(s), uint64(len(s))
	}
	expect(t, StatusInvalid, func() int32 { return WriterWriteVectors(w, nil, ptr(sizes), 2) }, "data is NULL")
	expect(t, StatusInvalid, func() int32 {
		return WriterWriteVectors(w, ptr([]unsafe.Pointer{nil}), ptr([]uint64{5}), 1)
	}, "data[0] is NULL")
	must(t, func() int32 { return WriterWriteVectors(w, ptr(data), ptr(sizes), uint64(len(samples))) })
	must(t, func() int32 { return WriterClose(w) })

	h := openReader(t, FlagCheckData, path)
	for k, s := range readBatch(t, h, 0, 1, 2, 3) {
		if !bytes.Equal(s, samples[k]) {
			t.Fatalf("sample %d differs", k)
		}
	}

	var needed uint64
	// Just written: not vouched for yet, so no identity, and no room needed for one.
	must(t, func() int32 { return ReaderVerified(h, nil, 0, unsafe.Pointer(&needed)) })
	if needed != 0 {
		t.Fatalf("needed = %d words for a file written just now", needed)
	}
	expect(t, StatusInvalid, func() int32 { return ReaderVerified(h, nil, 0, nil) }, "needed is NULL")
	ids := []uint64{1, 2, 3, 4, 5, 6}
	paths := []unsafe.Pointer{cstr(path)}
	var h2 int64
	expect(t, StatusInvalid, func() int32 {
		return ReaderOpenVerified(ptr(paths), 1, FlagCheckData, ptr(ids), 6, unsafe.Pointer(&h2))
	}, "multiple of 5")
	must(t, func() int32 {
		return ReaderOpenVerified(ptr(paths), 1, FlagCheckData, ptr(ids), 5, unsafe.Pointer(&h2))
	})
	ReaderClose(h2)

	var queued uint64
	must(t, func() int32 { return ReaderPrefetch(h, ptr([]uint64{3, 0}), 2, unsafe.Pointer(&queued)) })
	expect(t, StatusIndex, func() int32 { return ReaderPrefetch(h, ptr([]uint64{4}), 1, unsafe.Pointer(&queued)) })
	expect(t, StatusInvalid, func() int32 { return ReaderPrefetch(h, ptr([]uint64{0}), 1, nil) }, "queued is NULL")
}
