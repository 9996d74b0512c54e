package core

import (
	"fmt"
	"slices"

	"github.com/ffrecord/ffrecord/core/source"
)

// The chunk rule: a file's samples are cut into chunks, runs of consecutive samples that a
// cache fetches with one request and a chunk-aware order reads together. Walking the
// samples in order, a new chunk starts when adding the next sample would push the chunk's
// stored bytes over the chunk size (the current chunk always holds at least one sample, so
// a sample larger than the chunk size is a chunk of its own). A chunk never crosses files.
// Orders (python/ffrecord/order.py) and the cache (core/source) both rely on exactly this.

// chunkStarts are the indices (in the file) of the first sample of each chunk.
func (f *dataFile) chunkStarts(chunkSize uint64) ([]uint64, error) {
	var starts []uint64
	var bytes uint64
	for i := range f.samples() {
		off, end, err := f.span(i)
		if err != nil {
			return nil, err
		}
		if size := end - off; i == 0 || bytes+size > chunkSize || bytes+size < bytes {
			starts = append(starts, i)
			bytes = size
		} else {
			bytes += size
		}
	}
	return starts, nil
}

// chunkOffsets are the byte offsets where the file's chunks start, then where the last
// one ends: chunk k is stored in bytes [offsets[k], offsets[k+1]). Empty for no samples.
func (f *dataFile) chunkOffsets(chunkSize uint64) ([]int64, error) {
	starts, err := f.chunkStarts(chunkSize)
	if err != nil || len(starts) == 0 {
		return nil, err
	}
	offsets := make([]int64, 0, len(starts)+1)
	for _, i := range starts {
		off, _, err := f.span(i)
		if err != nil {
			return nil, err
		}
		offsets = append(offsets, int64(off))
	}
	_, end, err := f.span(f.samples() - 1)
	return append(offsets, int64(end)), err
}

// ChunkBounds are the dataset-wide indices of the first sample of each chunk (files in
// order), then Len: chunk k holds samples [bounds[k], bounds[k+1]).
func (r *Reader) ChunkBounds(chunkSize uint64) ([]uint64, error) {
	if chunkSize == 0 {
		return nil, fmt.Errorf("%w: chunk size 0", ErrInvalid)
	}
	if err := r.acquire(); err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	var bounds []uint64
	for k, f := range r.files {
		err := withFaultGuard(func() (string, int64) { return f.path, -1 }, func() error {
			starts, err := f.chunkStarts(chunkSize)
			for _, s := range starts {
				bounds = append(bounds, r.starts[k]+s)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return append(bounds, r.Len()), nil
}

// StatNames name the values of Stats (the C ABI's order, capi/ffrecord.h): the sources'
// counters, then the stored bytes of remote samples the reader delivered.
var StatNames = append(slices.Clip(source.StatNames), "bytes_delivered")

// Stats are the reader's counters, named by StatNames: requests to object storage, bytes
// received, retries, the chunk cache's hits, misses, evictions, chunks read uncached for
// want of room and chunks downloaded ahead, and the stored bytes of remote samples read.
func (r *Reader) Stats() []int64 { return append(r.stats.Snapshot(), r.delivered.Load()) }
