package core

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/ffrecord/ffrecord/core/internal/engine"
)

// verifyWindow is how much sample data Verify reads per system call: runs of adjacent
// samples are read together, so checking a file streams it at disk speed. Each call starts
// with runs of firstVerifyRun bytes and doubles them up to the window, so that a caller
// stopping after a few bad samples (a page at a time) has not read megabytes past them.
const (
	verifyWindow   = 8 << 20
	firstVerifyRun = 64 << 10
)

// verifyWindows keeps read buffers between calls: a caller taking bad samples a page at a
// time calls Verify many times.
var verifyWindows = sync.Pool{New: func() any {
	buf := make([]byte, verifyWindow)
	return &buf
}}

// BadSample is a damaged sample found by Verify.
type BadSample struct {
	Index uint64 // in the dataset
	// Err says what is wrong, naming the file and the sample as a read would; it wraps
	// ErrChecksum (the stored bytes do not match their CRC-32) or ErrCorrupt (the sample
	// lies outside the file's data, or does not decode to its recorded size).
	Err error
}

// Verify checks, whatever the reader's options, the metadata of every file involved and
// every sample in [start, start+count), in order: its place in the file, its CRC-32 and,
// for a compressed sample, that it decodes to its recorded size. It calls bad for each bad
// sample; when bad returns false the check stops at that sample, which a later Verify from
// its index reports again, so a caller can take bad samples a page at a time without
// checking anything twice. A file's metadata is checked once per Reader; a damaged one
// gives an error wrapping ErrChecksum or ErrCorrupt, returned after the samples have been
// checked. An error is also returned when data cannot be read at all.
func (r *Reader) Verify(start, count uint64, bad func(BadSample) bool) error {
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
		buf := verifyWindows.Get().(*[]byte)
		defer verifyWindows.Put(buf)
		window = *buf
	}
	stopped := false
	for k, f := range r.files {
		lo, hi := max(start, r.starts[k]), min(start+count, r.starts[k+1])
		empty := r.starts[k] == r.starts[k+1]
		if lo >= hi && !(empty && start <= r.starts[k] && r.starts[k] <= start+count) {
			continue
		}
		base := r.starts[k]
		if err := r.metadata(k).err; err != nil {
			metaErrs = append(metaErrs, err)
		}
		var where int64 = -1
		err := withFaultGuard(func() (string, int64) { return f.path, where }, func() error {
			return f.verifySamples(lo-base, hi-base, window, &where, func(local uint64, why error) bool {
				fault, ok := why.(*sampleFault)
				if !ok {
					fault = &sampleFault{detail: why}
				}
				fault.path, fault.local, fault.global = f.path, local, base+local
				stopped = !bad(BadSample{Index: base + local, Err: fault})
				return !stopped
			})
		})
		if err != nil {
			return err
		}
		if stopped {
			break
		}
	}
	return errors.Join(metaErrs...)
}

// metadataResult is the outcome of one file's metadata check.
type metadataResult struct {
	state MetadataState
	err   error // why the state is MetadataDamaged
}

// metadata checks the metadata of file k the first time it is asked, and returns the
// same answer after: the header does not change while the file is open.
func (r *Reader) metadata(k int) metadataResult {
	if v, ok := r.metadataChecks.Load(k); ok {
		return v.(metadataResult)
	}
	f := r.files[k]
	var res metadataResult
	err := withFaultGuard(func() (string, int64) { return f.path, -1 }, func() error {
		if le.Uint32(f.data) == 0 {
			res.state = MetadataLegacy
		}
		return f.verifyMetadata()
	})
	if err != nil {
		res = metadataResult{MetadataDamaged, err}
	}
	r.metadataChecks.Store(k, res)
	return res
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

// verifySamples checks samples [lo, hi) of the file, reporting each bad one by local index
// and why until report returns false; window is its read buffer, verifyWindow bytes.
func (f *dataFile) verifySamples(lo, hi uint64, window []byte, where *int64, report func(uint64, error) bool) error {
	var decoded []byte
	run := uint64(firstVerifyRun)
	for i := lo; i < hi; run = min(2*run, verifyWindow) {
		*where = int64(i)
		off, end, err := f.span(i)
		if err != nil {
			if !report(i, err) {
				return nil
			}
			i++
			continue
		}
		if end-off > verifyWindow {
			why, err := f.verifyLarge(i, off, end, window)
			if err != nil {
				return err
			}
			if why != nil && !report(i, why) {
				return nil
			}
			i++
			continue
		}
		// Gather the run of adjacent samples that fits the run's size (at least one sample).
		j, runEnd := i+1, end
		for ; j < hi; j++ {
			o, e, err := f.span(j)
			if err != nil || o != runEnd || e-off > run {
				break
			}
			runEnd = e
		}
		data := window[:runEnd-off]
		if err := preadFull(f, data, off); err != nil {
			return err
		}
		for ; i < j; i++ {
			*where = int64(i)
			o, e, _ := f.span(i)
			if why := f.storedProblem(i, data[o-off:e-off], &decoded); why != nil && !report(i, why) {
				return nil
			}
		}
	}
	return nil
}

// storedProblem says what is wrong with the stored bytes of sample i, nil when nothing is;
// decoded is scratch space for decoding, grown as needed.
func (f *dataFile) storedProblem(i uint64, stored []byte, decoded *[]byte) error {
	if got := checksumIEEE(stored); got != f.checksum(i) {
		return f.checksumMismatch(i, got)
	}
	if f.ext == nil {
		return nil
	}
	if f.ext.sampleCompression(i) == compressionRaw {
		return f.rawSizeMismatch(i, uint64(len(stored)))
	}
	size := f.ext.originalSize(i)
	if size > maxPackedSample {
		return errorf(f.path, int64(i), ErrCorrupt,
			"recorded size %d is larger than a compressed sample can be (%d)", size, maxPackedSample)
	}
	if uint64(cap(*decoded)) < size {
		*decoded = make([]byte, size)
	}
	if err := decode(f.ext.sampleCompression(i), stored, (*decoded)[:size]); err != nil {
		return &fileError{path: f.path, index: int64(i), err: err}
	}
	return nil
}

// verifyLarge checks a sample larger than the read window, which it reads through; why is
// what is wrong with it, err a failure to read it.
func (f *dataFile) verifyLarge(i, off, end uint64, window []byte) (why, err error) {
	if f.ext != nil && f.ext.sampleCompression(i) != compressionRaw {
		stored := make([]byte, end-off)
		if err := preadFull(f, stored, off); err != nil {
			return nil, err
		}
		return f.storedProblem(i, stored, new([]byte)), nil
	}
	if f.ext != nil {
		if why := f.rawSizeMismatch(i, end-off); why != nil {
			return why, nil
		}
	}
	var sum uint32
	for pos := off; pos < end; {
		part := window[:min(uint64(len(window)), end-pos)]
		if err := preadFull(f, part, pos); err != nil {
			return nil, err
		}
		sum = updateIEEE(sum, part)
		pos += uint64(len(part))
	}
	if sum != f.checksum(i) {
		return f.checksumMismatch(i, sum), nil
	}
	return nil, nil
}

// checksumMismatch is why sample i, whose stored bytes have CRC-32 got, is bad; Verify
// fills in where the sample is.
func (f *dataFile) checksumMismatch(i uint64, got uint32) error {
	return &sampleFault{stored: f.checksum(i), computed: got}
}

// sampleFault is why a sample of the dataset is bad. It keeps what was found and words it
// only when asked: verifying a badly damaged file finds many bad samples, and a caller that
// only counts them never reads a message.
type sampleFault struct {
	path          string
	local, global uint64 // the sample's index in its file and in the dataset
	// detail is the error found, or nil for the common case: a checksum mismatch between
	// stored and computed.
	detail           error
	stored, computed uint32
}

func (e *sampleFault) Error() string {
	err := e.detail
	if err == nil {
		err = errorf(e.path, int64(e.local), ErrChecksum, "stored 0x%08x, computed 0x%08x", e.stored, e.computed)
	}
	return sampleError(err, e.global, e.local).Error()
}

func (e *sampleFault) Unwrap() error {
	if e.detail == nil {
		return ErrChecksum
	}
	return e.detail
}

// rawSizeMismatch is the error for a raw sample i of a compressed file stored in a size
// other than its recorded one, nil when the sizes agree.
func (f *dataFile) rawSizeMismatch(i, stored uint64) error {
	if recorded := f.ext.originalSize(i); recorded != stored {
		return errorf(f.path, int64(i), ErrCorrupt, "raw sample of %d bytes recorded as %d bytes", stored, recorded)
	}
	return nil
}

// preadFull fills p from offset off of the file.
func preadFull(f *dataFile, p []byte, off uint64) error {
	if f.remote != nil {
		return f.fetchInto(p, off)
	}
	if f.mappedOnly() { // under Verify's fault guard: a file cut short faults
		copy(p, f.data[off:off+uint64(len(p))])
		return nil
	}
	err := engine.ReadFull(f.fd, p, int64(off))
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(f.path, -1, ErrCorrupt, "file shrank while open: %v", err)
	case err != nil:
		return &fileError{path: f.path, index: -1, err: err}
	}
	return nil
}
