//go:build !amd64

package core

import "unsafe"

// prefetch is a no-op where no assembly version exists.
func prefetch(p unsafe.Pointer, n uintptr) {}
