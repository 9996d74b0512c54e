package core

import "unsafe"

// loadCacheLines asks the CPU to start loading the n bytes at p into its caches (one
// PREFETCHT0 per cache line), so the misses of the next samples of a batch overlap with
// the work on the current one. Not to be confused with Reader.Prefetch, which asks the
// kernel to read samples into the page cache.
//
//go:noescape
func loadCacheLines(p unsafe.Pointer, n uintptr)
