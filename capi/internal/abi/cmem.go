package abi

import (
	"fmt"
	"unsafe"
)

// maxSpan bounds the byte size of a caller array turned into a slice: unsafe.Slice panics
// beyond the address space, and no real buffer comes near it (user space on amd64 and
// arm64 is at most 2^47 bytes).
const maxSpan = 1 << 47

// cString copies the NUL-terminated string at p into Go memory.
func cString(p unsafe.Pointer) string {
	n := 0
	for *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}

// copyCString copies s into buf[0:size), truncated to size-1 bytes, NUL-terminated.
// It does nothing when buf is NULL or size is 0.
func copyCString(buf unsafe.Pointer, size uintptr, s string) {
	if buf == nil || size == 0 {
		return
	}
	dst := unsafe.Slice((*byte)(buf), size)
	n := copy(dst[:size-1], s)
	dst[n] = 0
}

// cArray views the caller's array of n elements at p for the duration of a call. It
// reports an error (for name, in function fn) when p is NULL while n > 0 or when n
// cannot describe a real buffer.
func cArray[T any](fn, name string, p unsafe.Pointer, n uint64) ([]T, error) {
	var zero T
	switch {
	case n == 0:
		return nil, nil
	case p == nil:
		return nil, &callError{StatusInvalid, fmt.Sprintf("%s: %s is NULL but its length is %d", fn, name, n)}
	case n > maxSpan/uint64(max(unsafe.Sizeof(zero), 1)):
		return nil, &callError{StatusInvalid, fmt.Sprintf("%s: length %d of %s is larger than any buffer", fn, n, name)}
	}
	return unsafe.Slice((*T)(p), n), nil
}

// outPointer checks that the result pointer name of fn is not NULL.
func outPointer(fn, name string, p unsafe.Pointer) error {
	if p == nil {
		return &callError{StatusInvalid, fmt.Sprintf("%s: %s is NULL", fn, name)}
	}
	return nil
}

// copyOutText copies text into the caller's buffer as copyText does, and records the
// failure of a buffer too small (or of needed being NULL) for function fn.
func copyOutText(fn, text string, buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) int32 {
	if err := outPointer(fn, "needed", needed); err != nil {
		return fail(err)
	}
	if status := copyText(text, buf, size, needed); status != StatusOK {
		return failf(status, fmt.Sprintf("%s: a buffer of %d bytes cannot hold %d bytes and a NUL", fn, size, len(text)))
	}
	return StatusOK
}

// copyText copies text into buf[0:size), truncated and NUL-terminated, sets *needed to its
// full length and returns FFR_E_SHORTBUF when it did not fit, without recording anything.
func copyText(text string, buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) int32 {
	*(*uintptr)(needed) = uintptr(len(text))
	copyCString(buf, size, text)
	if buf == nil || size <= uintptr(len(text)) {
		return StatusShortBuf
	}
	return StatusOK
}
