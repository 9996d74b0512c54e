package abi

import (
	"fmt"
	"math/rand/v2"
	"sync"
)

// table maps integer handles to open objects of one kind. Handles of a kind share its
// parity (readers odd, writers even) and are numbered from a random base, so a handle of
// the wrong kind, or one kept from another copy of the library (say, across a fork), is
// reported as never valid instead of reaching an unrelated object. A handle of the right
// kind at or below the last one issued that is no longer open was closed; no tombstones
// are needed.
type table[T any] struct {
	kind   string
	parity int64
	mu     sync.RWMutex
	base   int64 // sequence numbers start just above base
	last   int64 // sequence number of the last handle issued
	open   map[int64]T
}

func newTable[T any](kind string, parity int64) *table[T] {
	base := rand.Int64N(1 << 30)
	return &table[T]{kind: kind, parity: parity, base: base, last: base, open: make(map[int64]T)}
}

// add registers v and returns its new handle.
func (t *table[T]) add(v T) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last++
	h := t.last<<1 | t.parity
	t.open[h] = v
	return h
}

// get returns the object of an open handle.
func (t *table[T]) get(fn string, h int64) (T, error) {
	t.mu.RLock()
	v, ok := t.open[h]
	t.mu.RUnlock()
	if !ok {
		return v, t.missing(fn, h)
	}
	return v, nil
}

// getEach sets out[k] to the object of open handle hs[k], for every k, under one lock (a
// batch gathered from many readers names hundreds).
func (t *table[T]) getEach(fn string, hs []int64, out []T) error {
	t.mu.RLock()
	for k, h := range hs {
		v, ok := t.open[h]
		if !ok {
			t.mu.RUnlock() // missing takes the lock again: a read lock held twice could wait on a writer forever
			return t.missing(fn, h)
		}
		out[k] = v
	}
	t.mu.RUnlock()
	return nil
}

// remove unregisters an open handle and returns its object.
func (t *table[T]) remove(fn string, h int64) (T, error) {
	t.mu.Lock()
	v, ok := t.open[h]
	delete(t.open, h)
	t.mu.Unlock()
	if !ok {
		return v, t.missing(fn, h)
	}
	return v, nil
}

// release is remove for the calls that close a handle, where closing one already closed
// is not an error: it then reports open false and no error.
func (t *table[T]) release(fn string, h int64) (v T, open bool, err error) {
	v, err = t.remove(fn, h)
	if err != nil && statusOf(err) == StatusClosed {
		return v, false, nil
	}
	return v, err == nil, err
}

// missing explains why h is not open: closed earlier, or never a handle of this kind.
func (t *table[T]) missing(fn string, h int64) error {
	t.mu.RLock()
	issued := h > 0 && h&1 == t.parity && h>>1 > t.base && h>>1 <= t.last
	t.mu.RUnlock()
	if issued {
		return &callError{StatusClosed, fmt.Sprintf("%s: %s handle %d is closed", fn, t.kind, h)}
	}
	return &callError{StatusHandle, fmt.Sprintf("%s: %d is not a %s handle", fn, h, t.kind)}
}

func (t *table[T]) len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.open)
}
