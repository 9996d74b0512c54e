package abi

import (
	"slices"
	"testing"
	"unsafe"
)

func TestPermute(t *testing.T) {
	positions := []int64{0, 1, 3, 4, 6}
	out := make([]int64, len(positions)+1)
	out[len(positions)] = -7 // past what the call may write
	must(t, func() int32 {
		return Permute(7, 3, 2, unsafe.Pointer(&positions[0]), uint64(len(positions)), unsafe.Pointer(&out[0]))
	})
	if want := []int64{5, 2, 3, 4, 0, -7}; !slices.Equal(out, want) {
		t.Fatalf("got %v, want %v (the last untouched)", out, want)
	}
	must(t, func() int32 { return Permute(7, 3, 2, nil, 0, nil) })
	outside := []int64{7}
	expect(t, StatusIndex, func() int32 {
		return Permute(7, 3, 2, unsafe.Pointer(&outside[0]), 1, unsafe.Pointer(&out[0]))
	}, "position 7 of a permutation of [0, 7)")
	expect(t, StatusInvalid, func() int32 { return Permute(7, 3, 2, unsafe.Pointer(&positions[0]), 2, nil) },
		"ffr_permute", "out is NULL")
	expect(t, StatusInvalid, func() int32 {
		return Permute(1<<63+1, 3, 2, unsafe.Pointer(&positions[0]), 1, unsafe.Pointer(&out[0]))
	}, "at most 2^63")
}
