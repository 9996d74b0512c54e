package core

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

var pageSize = uint64(os.Getpagesize())

// pageResident reports whether the page of mapping holding byte off is in the page cache
// (true when that cannot be asked).
func pageResident(mapping []byte, off uint64) bool {
	page := off &^ (pageSize - 1)
	var vec [1]byte
	return !mincore(unsafe.Pointer(&mapping[page]), uintptr(pageSize), vec[:]) || vec[0]&1 != 0
}

// mincore fills vec with a byte per page of the length bytes at addr (page aligned; a
// mapping's last page may run past its slice) whose low bit says the page is in the page
// cache; false when the call fails. mincore never blocks, so the raw syscall (no scheduler
// hand-off) is the cheap way in.
func mincore(addr unsafe.Pointer, length uintptr, vec []byte) bool {
	_, _, errno := unix.RawSyscall(unix.SYS_MINCORE, uintptr(addr), length, uintptr(unsafe.Pointer(&vec[0])))
	return errno == 0
}
