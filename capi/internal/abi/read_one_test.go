package abi

import (
	"bytes"
	"slices"
	"testing"
	"unsafe"
)

// TestReadersReadOne: sample i of several readers comes back to back, as separate
// read_batch calls would give it; a short buffer reports every size; bad handles and
// indices are refused.
func TestReadersReadOne(t *testing.T) {
	noLeaks(t)
	a := openReader(t, FlagCheckData, golden("basic.ffr"))
	b := openReader(t, 0, golden("basic.ffr"))
	handles := []int64{a, b, a}
	for _, index := range []uint64{0, 2, 3} {
		want := slices.Concat(readBatch(t, a, index)[0], readBatch(t, b, index)[0], readBatch(t, a, index)[0])
		dst := make([]byte, len(want)+7)
		sizes := make([]uint64, 3)
		must(t, func() int32 {
			return ReadersReadOne(ptr(handles), 3, index, ptr(dst), uint64(len(dst)), ptr(sizes))
		})
		if !bytes.Equal(dst[:len(want)], want) || sizes[0]+sizes[1]+sizes[2] != uint64(len(want)) {
			t.Fatalf("sample %d: got %d bytes, sizes %v; want %d bytes", index, len(dst), sizes, len(want))
		}
		if len(want) > 0 {
			short := make([]uint64, 3)
			expect(t, StatusShortBuf, func() int32 {
				return ReadersReadOne(ptr(handles), 3, index, ptr(dst), uint64(len(want)-1), ptr(short))
			}, "need")
			if !slices.Equal(short, sizes) {
				t.Fatalf("sample %d: sizes %v after a short buffer, want %v", index, short, sizes)
			}
		}
	}
	sizes := make([]uint64, 1)
	dst := make([]byte, 1<<16)
	expect(t, StatusIndex, func() int32 { return ReadersReadOne(ptr(handles), 1, 1<<40, ptr(dst), 1<<16, ptr(sizes)) })
	expect(t, StatusInvalid, func() int32 { return ReadersReadOne(nil, 1, 0, ptr(dst), 1<<16, ptr(sizes)) }, "handles")
	bad := []int64{a, 1 << 40}
	sizes = make([]uint64, 2)
	status := call(func() int32 { return ReadersReadOne(ptr(bad), 2, 0, ptr(dst), 1<<16, unsafe.Pointer(&sizes[0])) }).status
	if status == StatusOK {
		t.Fatal("an unknown handle was accepted")
	}
}
