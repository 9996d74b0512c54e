package core

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

var pageSize = uint64(os.Getpagesize())

// pageResident reports whether the page of mapping holding byte off is in the page cache.
// mincore never blocks, so the raw syscall (no scheduler hand-off) is the cheap way in.
func pageResident(mapping []byte, off uint64) bool {
	page := off &^ (pageSize - 1)
	var vec [1]byte
	_, _, errno := unix.RawSyscall(unix.SYS_MINCORE,
		uintptr(unsafe.Pointer(&mapping[page])), uintptr(pageSize), uintptr(unsafe.Pointer(&vec[0])))
	return errno != 0 || vec[0]&1 != 0
}
