package abi

import (
	"fmt"
	"unsafe"

	"github.com/ffrecord/ffrecord/core/remote"
)

// Locate implements ffr_locate.
func Locate(path, kind, buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_locate"
	if path == nil {
		return failf(StatusInvalid, fn+": path is NULL")
	}
	if err := outPointer(fn, "kind", kind); err != nil {
		return fail(err)
	}
	local, pathKind, err := remote.Locate(cString(path))
	if err != nil {
		return fail(err)
	}
	*(*uint32)(kind) = uint32(pathKind)
	return copyOutText(fn, local, buf, size, needed)
}

// CheckOptions implements ffr_check_options.
func CheckOptions(options unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_check_options"
	if options == nil {
		return failf(StatusInvalid, fn+": options is NULL")
	}
	if err := remote.CheckOptions(cString(options)); err != nil {
		return failf(StatusInvalid, fmt.Sprintf("%s: %v", fn, err))
	}
	return StatusOK
}
