//go:build !amd64

package core

import "unsafe"

// loadCacheLines is a no-op where no assembly version exists.
func loadCacheLines(p unsafe.Pointer, n uintptr) {}
