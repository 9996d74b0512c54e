package abi

import (
	"unsafe"

	"github.com/ffrecord/ffrecord/core"
)

// Permute implements ffr_permute.
func Permute(n, seed, epoch uint64, positions unsafe.Pointer, count uint64, out unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_permute"
	in, err := cArray[int64](fn, "positions", positions, count)
	if err != nil {
		return fail(err)
	}
	dst, err := cArray[int64](fn, "out", out, count)
	if err != nil {
		return fail(err)
	}
	p, err := core.NewPermutation(n, seed, epoch)
	if err != nil {
		return fail(err)
	}
	if err := p.Map(in, dst); err != nil {
		return fail(err)
	}
	return StatusOK
}
