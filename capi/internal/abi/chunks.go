package abi

import (
	"fmt"
	"unsafe"

	"github.com/ffrecord/ffrecord/core"
)

// ReaderChunkBounds implements ffr_reader_chunk_bounds: the first sample of each chunk,
// then the dataset's length, into bounds[0 .. cap); *needed is how many there are.
func ReaderChunkBounds(handle int64, chunkSize uint64, bounds unsafe.Pointer, capacity uint64, needed unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_chunk_bounds"
	r, err := readers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	if err := outPointer(fn, "needed", needed); err != nil {
		return fail(err)
	}
	dst, err := cArray[uint64](fn, "bounds", bounds, capacity)
	if err != nil {
		return fail(err)
	}
	have, err := r.ChunkBounds(chunkSize)
	if err != nil {
		return fail(err)
	}
	*(*uint64)(needed) = uint64(len(have))
	if len(dst) < len(have) {
		return failf(StatusShortBuf, fmt.Sprintf("%s: room for %d bounds, there are %d", fn, len(dst), len(have)))
	}
	copy(dst, have)
	return StatusOK
}

// FirstRequestBytes implements ffr_first_request_bytes (core.FirstRequestBytes).
func FirstRequestBytes(chunkSize uint64, readAhead bool, bytes unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	if err := outPointer("ffr_first_request_bytes", "bytes", bytes); err != nil {
		return fail(err)
	}
	*(*uint64)(bytes) = uint64(core.FirstRequestBytes(int64(min(chunkSize, 1<<62)), readAhead))
	return StatusOK
}

// ReaderStats implements ffr_reader_stats: the reader's counters (FFR_STAT_*) into
// stats[0 .. min(n, FFR_STAT_FIELDS)).
func ReaderStats(handle int64, stats unsafe.Pointer, n uint64) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_stats"
	r, err := readers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	dst, err := cArray[int64](fn, "stats", stats, n)
	if err != nil {
		return fail(err)
	}
	copy(dst, r.Stats())
	return StatusOK
}

// The counters of ffr_reader_stats, mirrored from ffrecord.h; core.Reader.Stats gives
// them in this order (core.StatNames).
const (
	StatRequests = iota
	StatBytes
	StatRetries
	StatHits
	StatMisses
	StatEvictions
	StatBypassed
	StatPrefetched
	StatDelivered
	StatFields
)

var _ = [1]struct{}{}[len(core.StatNames)-StatFields] // the core names as many counters
