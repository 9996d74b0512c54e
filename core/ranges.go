package core

import (
	"fmt"
	"io"
)

// Range is Length bytes of sample Index from byte Offset, the bytes counted as ReadBatch
// returns the sample (its original bytes when the file is compressed).
type Range struct {
	Index, Offset, Length uint64
}

// ReadRanges reads the byte ranges back to back into dst, in the order given (any mix of
// samples, files and overlaps). It reads only the bytes asked for from an uncompressed
// sample; a compressed sample is read and decoded whole and the range copied out of it.
//
// A range that covers a whole sample is checked against the sample's CRC-32 when the reader
// checks data, as ReadBatch would. A partial range cannot be (the CRC covers the whole
// sample) and is returned unchecked: a caller that needs checked partial reads stores its
// own checksums inside its samples (see the structured datasets in the package
// documentation). A range that ends past the end of its sample is an error wrapping
// ErrIndex naming the sample and the range; when dst is smaller than the ranges add up to,
// the error wraps io.ErrShortBuffer. Either way nothing is read.
func (r *Reader) ReadRanges(ranges []Range, dst []byte) error {
	return r.readRanges(ranges, dst, nil)
}

// readRanges is ReadRanges, handing each range's bytes to use (when not nil) as well: a
// part of a raw sample is handed where it was read, the file's mapping perhaps, and is
// then not copied into dst, which is only scratch for reads the mapping cannot serve.
// use runs under the reader's fault guard.
func (r *Reader) readRanges(ranges []Range, dst []byte, use func(k int, part []byte)) error {
	if err := r.acquire(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	b := getBatch(len(ranges))
	defer putBatch(b)

	whole := make([]bool, len(ranges)) // the range is its whole sample, checked as such
	var cur *batchItem
	return withFaultGuard(faultAt(&cur, r.files[0].path), func() error {
		var total uint64
		for k, rg := range ranges {
			it := &b.items[k]
			cur = it
			var err error
			if whole[k], err = r.planRange(it, rg); err != nil {
				return err
			}
			it.out = total
			if total+rg.Length < total {
				return fmt.Errorf("%w: the ranges add up to more than 2^64 bytes", ErrInvalid)
			}
			total += rg.Length
		}
		if total > uint64(len(dst)) {
			return fmt.Errorf("%w: %w: the ranges need %d bytes, the buffer has %d",
				io.ErrShortBuffer, ErrInvalid, total, len(dst))
		}
		if err := r.fetch(b, dst[:total]); err != nil {
			return err
		}
		for k, rg := range ranges {
			it := &b.items[k]
			cur = it
			out := dst[it.out : it.out+rg.Length]
			if use != nil && !whole[k] && it.inPlace() {
				use(k, it.src)
				continue
			}
			if err := r.deliverPart(it, rg, whole[k], out); err != nil {
				return err
			}
			if use != nil {
				use(k, out)
			}
		}
		return nil
	})
}

// planRange plans the read of one range: of just its bytes when the sample is stored raw
// and the range is part of it, else of the whole stored sample. whole tells whether the
// range is the whole sample.
func (r *Reader) planRange(it *batchItem, rg Range) (whole bool, err error) {
	fk, local, err := r.locate(rg.Index)
	if err != nil {
		return false, err
	}
	if err := r.plan(it, r.files[fk], local, r.starts[fk]); err != nil {
		return false, err
	}
	if rg.Offset > it.size || rg.Length > it.size-rg.Offset {
		return false, sampleError(errorf(it.file.path, int64(local), ErrIndex,
			"bytes [%d, %d) are past the end of the %d-byte sample", rg.Offset, rg.Offset+rg.Length, it.size),
			it.global, local)
	}
	whole = rg.Offset == 0 && rg.Length == it.size
	if it.inPlace() && !whole {
		it.off += rg.Offset
		it.end = it.off + rg.Length
		it.size = rg.Length
	}
	return whole, nil
}

// deliverPart puts the bytes of one planned range in out: a whole sample is delivered as
// ReadBatch delivers it (checked), a part of a raw sample is where it was read or copied,
// a part of a compressed sample is cut out of the decoded sample.
func (r *Reader) deliverPart(it *batchItem, rg Range, whole bool, out []byte) error {
	switch {
	case whole:
		return r.deliver(it, out)
	case it.inPlace():
		if len(out) > 0 && &out[0] != &it.src[0] {
			copy(out, it.src)
		}
		return nil
	}
	decoded := make([]byte, it.size)
	if err := r.deliver(it, decoded); err != nil {
		return err
	}
	copy(out, decoded[rg.Offset:])
	return nil
}
