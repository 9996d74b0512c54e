package core

import "unsafe"

// prefetch asks the CPU to start loading the n bytes at p into cache (one PREFETCHT0
// per cache line), so the misses of the next samples of a batch overlap with the work
// on the current one.
//
//go:noescape
func prefetch(p unsafe.Pointer, n uintptr)
