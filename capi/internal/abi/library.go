// Package abi is the logic behind the C ABI of libffrecord (capi/ffrecord.h): the handle
// tables, argument checks, error classification and per-thread error messages. The cgo
// exports in capi/main.go only convert C types and call the function of the same name
// here, so everything below can be tested from Go without cgo.
//
// Pointers received are C (or Python) memory: they are used only during the call and never
// kept, and no Go pointer is ever handed back.
package abi

import (
	"fmt"
	"runtime/debug"
	"unsafe"

	"github.com/ffrecord/ffrecord/core"
)

// Version is the library version reported by ffr_version. Keep it equal to the Python
// package's __version__.
const Version = "0.1.0"

// ABIVersion mirrors FFR_ABI_VERSION in ffrecord.h.
const ABIVersion int32 = 2

var (
	readers = newTable[*core.Reader]("reader", 1)
	writers = newTable[*core.Writer]("writer", 0)
)

// recoverPanic, deferred by every entry point, turns a panic into FFR_E_INTERNAL so that a
// bug in the library never takes down the host process.
func recoverPanic(status *int32) {
	if p := recover(); p != nil {
		*status = failf(StatusInternal, fmt.Sprintf("ffrecord internal error (a bug, please report it): %v\n%s", p, debug.Stack()))
	}
}

// LibraryVersion implements ffr_version. The ABI version is set first and whatever else
// happens, so that a caller can tell a library it cannot talk to from any other failure.
func LibraryVersion(buf unsafe.Pointer, size uintptr, abiVersion unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_version"
	if err := outPointer(fn, "abi_version", abiVersion); err != nil {
		return fail(err)
	}
	*(*int32)(abiVersion) = ABIVersion
	if buf == nil && size == 0 {
		return StatusOK
	}
	var needed uintptr
	return copyOutText(fn, Version, buf, size, unsafe.Pointer(&needed))
}

// OpenHandles implements ffr_open_handles.
func OpenHandles(count unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	if err := outPointer("ffr_open_handles", "count", count); err != nil {
		return fail(err)
	}
	*(*uint64)(count) = uint64(readers.len() + writers.len())
	return StatusOK
}
