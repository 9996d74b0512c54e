package core

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

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
		if err := r.pieceOffsets(&p, offsets, it); err != nil {
			return nil, err
		}
		r.window.noteHeaderBytes(p.count*perSampleHeader, r.files)
		pieces = append(pieces, p)
		at += p.count
	}
	return pieces, nil
}

// pieceOffsets fills offsets[p.at+1 .. p.at+p.count] (and p.off, for a raw file). The samples of a file without
// an extension record are their stored bytes, so their offsets are the header's, taken
// straight from its table: a sample the header places outside the data area is reported by
// the same check a batch makes (dataFile.span). Other files' samples are planned one by one.
func (r *Reader) pieceOffsets(p *spanPiece, offsets []uint64, it *batchItem) error {
	f, base := p.file, offsets[p.at]
	if f.ext != nil {
		for k := range p.count {
			if err := r.plan(it, f, p.first+k, p.global-p.first); err != nil {
				return err
			}
			end := offsets[p.at+k] + it.size
			if end < it.size {
				return errorf(f.path, int64(it.local), ErrCorrupt, "sample size %d overflows the run", it.size)
			}
			offsets[p.at+k+1] = end
		}
		return nil
	}
	table := f.data[offsetPos(f.stored, p.first):offsetPos(f.stored, f.stored)]
	stored := func(k uint64) uint64 { // where sample p.first+k starts, or, for the file's last, the end
		if p.first+k == f.stored {
			return f.size
		}
		return le.Uint64(table[offsetSize*k:])
	}
	p.off = stored(0)
	prev := p.off
	ok := p.off >= f.header
	for k := uint64(1); ok && k <= p.count; k++ {
		next := stored(k)
		ok = next >= prev && next <= f.size
		offsets[p.at+k] = base + next - p.off
		prev = next
	}
	if ok {
		return nil
	}
	for k := range p.count { // the first sample out of place, named as a batch names it
		it.file, it.local, it.global = f, p.first+k, p.global+k
		if _, _, err := f.span(it.local); err != nil {
			return sampleError(err, it.global, it.local)
		}
	}
	return errorf(f.path, -1, ErrCorrupt, "the header places samples %d to %d outside the data area", p.first, p.first+p.count-1)
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
	parts := min(uint64(runtime.GOMAXPROCS(0)), p.count)
	if p.count < parallelChecks && uint64(len(out)) < parallelBytes {
		parts = 1
	}
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for j := uint64(1); j < parts; j++ {
		wg.Go(func() {
			mine := &batchItem{file: p.file}
			errs[j] = withFaultGuard(faultAt(&mine, p.file.path), func() error {
				return checkSamples(p, j*p.count/parts, (j+1)*p.count/parts, out, offsets, mine)
			})
		})
	}
	errs[0] = checkSamples(p, 0, p.count/parts, out, offsets, it)
	wg.Wait()
	return errors.Join(errs...)
}

// parallelChecks is the number of samples from which a piece's CRCs are checked on every
// core (as they are from parallelBytes of them): a CRC-32 of a short sample costs about
// 25 ns here, so a few thousand of them pay for starting goroutines (~20 µs).
const parallelChecks = 8192

// checkSamples checks samples [from, to) of piece p (read into out) against their CRC-32s;
// it tracks the sample in hand for fault reports.
func checkSamples(p spanPiece, from, to uint64, out []byte, offsets []uint64, it *batchItem) error {
	base := offsets[p.at]
	for k := from; k < to; k++ {
		it.local, it.global = p.first+k, p.global+k
		sample := out[offsets[p.at+k]-base : offsets[p.at+k+1]-base]
		if err := checkStored(p.file, it.local, it.global, sample); err != nil {
			return err
		}
	}
	return nil
}
