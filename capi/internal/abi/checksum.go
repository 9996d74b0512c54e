package abi

import (
	"unsafe"

	"github.com/ffrecord/ffrecord/core"
)

// CRC32C implements ffr_crc32c.
func CRC32C(crc uint32, data unsafe.Pointer, size uint64, out unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_crc32c"
	if err := outPointer(fn, "out", out); err != nil {
		return fail(err)
	}
	buf, err := cArray[byte](fn, "data", data, size)
	if err != nil {
		return fail(err)
	}
	*(*uint32)(out) = core.UpdateCRC32C(crc, buf)
	return StatusOK
}
