package core

import (
	"fmt"
	"io"

	"github.com/ffrecord/ffrecord/core/internal/engine"
)

// spanPiece is the part of a run of samples that lies in one file.
type spanPiece struct {
	file   *dataFile
	first  uint64 // index of its first sample in the file
	global uint64 // and in the dataset
	count  uint64
	at     uint64 // index of its first sample in the run (and in offsets)
	off    uint64 // where its first sample is stored in the file
}

// ReadSpan reads samples [start, start+count) back to back into dst and sets offsets[k]
// (count+1 of them) to where sample start+k begins in dst, offsets[count] to where the
// last one ends: the data and offsets of an Arrow binary array, with no work per sample
// left to the caller. Samples are stored back to back in a file, so the part of the run
// that lies in one uncompressed local file is read by one system call and then, with
// CheckData, checked sample by sample against its CRC-32 (an error names the sample as
// ReadBatch's do); a compressed or remote file, or a reader in Direct mode, is read as
// ReadBatch reads it. A run past the end of the dataset wraps ErrIndex, fewer than count+1
// offsets ErrInvalid; a dst shorter than the samples add up to wraps io.ErrShortBuffer,
// with offsets filled and nothing read.
func (r *Reader) ReadSpan(start, count uint64, dst []byte, offsets []uint64) error {
	if start > r.Len() || count > r.Len()-start {
		return fmt.Errorf("%w: samples [%d, %d) of a dataset of %d", ErrIndex, start, start+count, r.Len())
	}
	if uint64(len(offsets)) <= count {
		return fmt.Errorf("%w: %d offsets for a run of %d samples (it takes %d)", ErrInvalid, len(offsets), count, count+1)
	}
	offsets[0] = 0
	if count == 0 {
		return nil
	}
	if err := r.acquire(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	var cur *batchItem
	return withFaultGuard(faultAt(&cur, r.files[0].path), func() error {
		pieces, err := r.spanOffsets(start, count, offsets, &cur)
		if err != nil {
			return err
		}
		if total := offsets[count]; total > uint64(len(dst)) {
			return fmt.Errorf("%w: %w: samples [%d, %d) need %d bytes, the buffer has %d",
				io.ErrShortBuffer, ErrInvalid, start, start+count, total, len(dst))
		}
		for _, p := range pieces {
			if err := r.readPiece(p, dst, offsets, &cur); err != nil {
				return err
			}
		}
		return nil
	})
}

// spanOffsets cuts the run into its files' pieces and fills offsets from the sizes of its
// samples (as ReadBatch returns them: a compressed sample's original size).
func (r *Reader) spanOffsets(start, count uint64, offsets []uint64, cur **batchItem) ([]spanPiece, error) {
	fk, local, err := r.locate(start)
	if err != nil {
		return nil, err
	}
	var pieces []spanPiece
	it := new(batchItem)
	*cur = it
	for at := uint64(0); at < count; fk, local = fk+1, 0 {
		f := r.files[fk]
		p := spanPiece{file: f, first: local, global: r.starts[fk] + local, count: min(count-at, f.samples()-local), at: at}
		for k := range p.count {
			if err := r.plan(it, f, local+k, r.starts[fk]); err != nil {
				return nil, err
			}
			if k == 0 {
				p.off = it.off
			}
			end := offsets[at+k] + it.size
			if end < it.size {
				return nil, errorf(f.path, int64(it.local), ErrCorrupt, "sample size %d overflows the run", it.size)
			}
			offsets[at+k+1] = end
		}
		r.window.noteHeaderBytes(p.count*(offsetSize+checksumSize), r.files)
		pieces = append(pieces, p)
		at += p.count
	}
	return pieces, nil
}

// readPiece reads the samples of one piece into their places in dst.
func (r *Reader) readPiece(p spanPiece, dst []byte, offsets []uint64, cur **batchItem) error {
	out := dst[offsets[p.at]:offsets[p.at+p.count]]
	if p.file.ext != nil || p.file.remote != nil || r.opts.Direct {
		indices := make([]uint64, p.count)
		for k := range indices {
			indices[k] = p.global + uint64(k)
		}
		return r.readBatch(indices, out, make([]uint64, p.count), cur)
	}
	it := &batchItem{file: p.file, local: p.first, global: p.global}
	*cur = it
	if len(out) > 0 {
		if err := shrunk(engine.ReadFull(p.file.fd, out, int64(p.off))); err != nil {
			return &fileError{path: p.file.path, index: -1, err: err}
		}
	}
	if !r.opts.CheckData {
		return nil
	}
	base := offsets[p.at]
	for k := range p.count {
		it.local, it.global = p.first+k, p.global+k
		sample := out[offsets[p.at+k]-base : offsets[p.at+k+1]-base]
		if err := checkStored(p.file, it.local, it.global, sample); err != nil {
			return err
		}
	}
	return nil
}
