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

// TestReadersReadBatch: (reader, index) pairs, in runs of one reader and single pairs, read
// back to back as separate read_batch calls would give them (duplicates and all orders);
// a short buffer reports every size; bad pairs are refused.
func TestReadersReadBatch(t *testing.T) {
	noLeaks(t)
	a := openReader(t, FlagCheckData, golden("basic.ffr"))
	b := openReader(t, 0, golden("multi/PART_00001.ffr"))
	cases := []struct {
		handles []int64
		indices []uint64
	}{
		{nil, nil},
		{[]int64{a}, []uint64{3}},
		{[]int64{a, a, a, b, b, a}, []uint64{0, 3, 0, 1, 0, 2}},
		{[]int64{b, a, b, a}, []uint64{0, 0, 0, 0}},
	}
	for _, c := range cases {
		var want [][]byte
		for k, h := range c.handles {
			want = append(want, readBatch(t, h, c.indices[k])[0])
		}
		joined := slices.Concat(want...)
		n := uint64(len(c.handles))
		dst := make([]byte, len(joined)+3)
		sizes := make([]uint64, n+1)
		must(t, func() int32 {
			return ReadersReadBatch(ptr(c.handles), ptr(c.indices), n, ptr(dst), uint64(len(dst)), ptr(sizes))
		})
		for k := range want {
			if sizes[k] != uint64(len(want[k])) {
				t.Fatalf("%v %v: sizes %v", c.handles, c.indices, sizes)
			}
		}
		if !bytes.Equal(dst[:len(joined)], joined) {
			t.Fatalf("%v %v: got other bytes", c.handles, c.indices)
		}
		if len(joined) > 0 {
			short := make([]uint64, n+1)
			expect(t, StatusShortBuf, func() int32 {
				return ReadersReadBatch(ptr(c.handles), ptr(c.indices), n, ptr(dst), uint64(len(joined)-1), ptr(short))
			}, "need")
			if !slices.Equal(short, sizes) {
				t.Fatalf("%v %v: sizes %v after a short buffer, want %v", c.handles, c.indices, short, sizes)
			}
		}
	}
	dst, sizes := make([]byte, 1<<16), make([]uint64, 2)
	far := []uint64{0, 1 << 40}
	expect(t, StatusIndex, func() int32 {
		return ReadersReadBatch(ptr([]int64{a, b}), ptr(far), 2, ptr(dst), 1<<16, ptr(sizes))
	})
	expect(t, StatusInvalid, func() int32 { return ReadersReadBatch(ptr([]int64{a}), nil, 1, ptr(dst), 1<<16, ptr(sizes)) }, "indices")
	if status := call(func() int32 {
		return ReadersReadBatch(ptr([]int64{a, 1 << 40}), ptr([]uint64{0, 0}), 2, ptr(dst), 1<<16, ptr(sizes))
	}).status; status == StatusOK {
		t.Fatal("an unknown handle was accepted")
	}
}
