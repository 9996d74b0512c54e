package core

import (
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/crc32"
)

// verifyWindow is how much sample data Verify reads per system call: runs of adjacent
// samples are read together, so checking a file streams it at disk speed.
const verifyWindow = 8 << 20

// Verify checks, whatever the reader's options, the metadata of every file involved and
// every sample in [start, start+count): its place in the file, its CRC-32 and, for a
// compressed sample, that it decodes to its recorded size. It calls bad with the dataset
// index of each bad sample, in order. A file whose metadata is damaged gives an error
// wrapping ErrChecksum or ErrCorrupt, returned after its samples have been checked; an
// error is also returned when data cannot be read at all.
func (r *Reader) Verify(start, count uint64, bad func(index uint64)) error {
	if err := r.acquire(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	if start > r.Len() || count > r.Len()-start {
		return fmt.Errorf("%w: range [%d, %d+%d) of a dataset of %d", ErrIndex, start, start, count, r.Len())
	}
	var metaErrs []error
	var window []byte // the read buffer of every file; an empty range reads nothing
	if count > 0 {
		window = make([]byte, verifyWindow)
	}
	for k, f := range r.files {
		lo, hi := max(start, r.starts[k]), min(start+count, r.starts[k+1])
		empty := r.starts[k] == r.starts[k+1]
		if lo >= hi && !(empty && start <= r.starts[k] && r.starts[k] <= start+count) {
			continue
		}
		base := r.starts[k]
		var where int64 = -1
		err := withFaultGuard(func() (string, int64) { return f.path, where }, func() error {
			if err := f.verifyMetadata(); err != nil {
				metaErrs = append(metaErrs, err)
			}
			return f.verifySamples(lo-base, hi-base, window, &where, func(local uint64) { bad(base + local) })
		})
		if err != nil {
			return err
		}
	}
	return errors.Join(metaErrs...)
}

// verifyMetadata checks the metadata checksum and, for a compressed file, the stored
// checksum of its extension record.
func (f *dataFile) verifyMetadata() error {
	if err := f.checkMetadata(); err != nil {
		return err
	}
	if f.ext == nil {
		return nil
	}
	last := f.stored - 1
	off, end, err := f.span(last)
	if err != nil {
		return err
	}
	if want, got := f.checksum(last), f.checksumRange(off, end); want != got {
		return errorf(f.path, int64(last), ErrChecksum,
			"extension record: stored 0x%08x, computed 0x%08x", want, got)
	}
	return nil
}

// verifySamples checks samples [lo, hi) of the file, reporting bad ones by local index;
// window is its read buffer, verifyWindow bytes.
func (f *dataFile) verifySamples(lo, hi uint64, window []byte, where *int64, bad func(uint64)) error {
	var decoded []byte
	for i := lo; i < hi; {
		*where = int64(i)
		off, end, err := f.span(i)
		if err != nil {
			bad(i)
			i++
			continue
		}
		if end-off > verifyWindow {
			ok, err := f.verifyLarge(i, off, end, window)
			if err != nil {
				return err
			}
			if !ok {
				bad(i)
			}
			i++
			continue
		}
		// Gather the run of adjacent samples that fits the window.
		j, runEnd := i+1, end
		for ; j < hi; j++ {
			o, e, err := f.span(j)
			if err != nil || o != runEnd || e-off > verifyWindow {
				break
			}
			runEnd = e
		}
		run := window[:runEnd-off]
		if err := preadFull(f, run, off); err != nil {
			return err
		}
		for ; i < j; i++ {
			*where = int64(i)
			o, e, _ := f.span(i)
			var ok bool
			ok, decoded = f.sampleIntact(i, run[o-off:e-off], decoded)
			if !ok {
				bad(i)
			}
		}
	}
	return nil
}

// sampleIntact checks one stored sample; decoded is scratch space for decoding, returned
// possibly grown.
func (f *dataFile) sampleIntact(i uint64, stored, decoded []byte) (bool, []byte) {
	if crc32.ChecksumIEEE(stored) != f.checksum(i) {
		return false, decoded
	}
	if f.ext == nil {
		return true, decoded
	}
	size := f.ext.originalSize(i)
	if f.ext.codec(i) == codecRaw {
		return size == uint64(len(stored)), decoded
	}
	if size > maxLZ4Sample {
		return false, decoded
	}
	if uint64(cap(decoded)) < size {
		decoded = make([]byte, size)
	}
	return decode(f.ext.codec(i), stored, decoded[:size]) == nil, decoded
}

// verifyLarge checks a sample larger than the read window, which it reads through.
func (f *dataFile) verifyLarge(i, off, end uint64, window []byte) (bool, error) {
	if f.ext != nil && f.ext.codec(i) != codecRaw {
		stored := make([]byte, end-off)
		if err := preadFull(f, stored, off); err != nil {
			return false, err
		}
		ok, _ := f.sampleIntact(i, stored, nil)
		return ok, nil
	}
	if f.ext != nil && f.ext.originalSize(i) != end-off {
		return false, nil
	}
	var sum uint32
	for pos := off; pos < end; {
		part := window[:min(uint64(len(window)), end-pos)]
		if err := preadFull(f, part, pos); err != nil {
			return false, err
		}
		sum = crc32.Update(sum, crc32.IEEETable, part)
		pos += uint64(len(part))
	}
	return sum == f.checksum(i), nil
}

// preadFull fills p from offset off of the file.
func preadFull(f *dataFile, p []byte, off uint64) error {
	err := preadSpan(&readSpan{fd: f.fd, off: int64(off), buf: p, need: len(p), align: 1})
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(f.path, -1, ErrCorrupt, "file shrank while open: %v", err)
	case err != nil:
		return &fileError{path: f.path, index: -1, err: err}
	}
	return nil
}
