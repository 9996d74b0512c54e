package abi

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/ffrecord/ffrecord/core"
)

// ReaderOpen implements ffr_reader_open.
func ReaderOpen(paths unsafe.Pointer, npaths uint64, flags uint32, handle unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_open"
	ptrs, err := cArray[unsafe.Pointer](fn, "paths", paths, npaths)
	if err != nil {
		return fail(err)
	}
	if err := outPointer(fn, "handle", handle); err != nil {
		return fail(err)
	}
	if unknown := flags &^ (FlagCheckData | FlagDirect); unknown != 0 {
		return failf(StatusInvalid, fmt.Sprintf("%s: unknown flags %#x", fn, unknown))
	}
	names := make([]string, len(ptrs))
	for i, p := range ptrs {
		if p == nil {
			return failf(StatusInvalid, fmt.Sprintf("%s: paths[%d] is NULL", fn, i))
		}
		names[i] = cString(p)
	}
	r, err := core.Open(names, core.ReaderOptions{
		CheckData: flags&FlagCheckData != 0,
		Direct:    flags&FlagDirect != 0,
	})
	if err != nil {
		return fail(err)
	}
	*(*int64)(handle) = readers.add(r)
	return StatusOK
}

// ReaderClose implements ffr_reader_close.
func ReaderClose(handle int64) (status int32) {
	defer recoverPanic(&status)
	r, open, err := readers.release("ffr_reader_close", handle)
	if err != nil {
		return fail(err)
	}
	if open {
		if err := r.Close(); err != nil {
			return fail(err)
		}
	}
	return StatusOK
}

// ReaderLen implements ffr_reader_len.
func ReaderLen(handle int64, n unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	return readerScalar("ffr_reader_len", handle, "n", n, (*core.Reader).Len)
}

// ReaderNfiles implements ffr_reader_nfiles.
func ReaderNfiles(handle int64, nfiles unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	return readerScalar("ffr_reader_nfiles", handle, "nfiles", nfiles,
		func(r *core.Reader) uint64 { return uint64(len(r.Files())) })
}

// readerScalar stores get(reader) at the result pointer out (called name).
func readerScalar(fn string, handle int64, name string, out unsafe.Pointer, get func(*core.Reader) uint64) int32 {
	r, err := readers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	if err := outPointer(fn, name, out); err != nil {
		return fail(err)
	}
	*(*uint64)(out) = get(r)
	return StatusOK
}

// ReaderFname implements ffr_reader_fname.
func ReaderFname(handle int64, i uint64, buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_fname"
	r, err := readers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	files := r.Files()
	if i >= uint64(len(files)) {
		return failf(StatusIndex, fmt.Sprintf("%s: file %d out of range [0, %d)", fn, i, len(files)))
	}
	return copyOutText(fn, files[i], buf, size, needed)
}

// ReaderWarnings implements ffr_reader_warnings.
func ReaderWarnings(handle int64, buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_warnings"
	r, err := readers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	return copyOutText(fn, strings.Join(r.Warnings(), "\n"), buf, size, needed)
}

// ReaderFileCounts implements ffr_reader_file_counts; nfiles is the capacity of counts.
func ReaderFileCounts(handle int64, counts unsafe.Pointer, nfiles uint64) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_file_counts"
	r, err := readers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	dst, err := cArray[uint64](fn, "counts", counts, nfiles)
	if err != nil {
		return fail(err)
	}
	have := r.FileCounts()
	if len(dst) < len(have) {
		return failf(StatusShortBuf, fmt.Sprintf("%s: room for %d counts, the reader has %d files", fn, len(dst), len(have)))
	}
	copy(dst, have)
	return StatusOK
}

// ReaderSizes implements ffr_reader_sizes.
func ReaderSizes(handle int64, indices unsafe.Pointer, n uint64, sizes unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	r, idx, out, err := batchArgs("ffr_reader_sizes", handle, indices, n, sizes)
	if err != nil {
		return fail(err)
	}
	if err := r.Sizes(idx, out); err != nil {
		return fail(err)
	}
	return StatusOK
}

// ReaderReadBatch implements ffr_reader_read_batch: the hot path, so nothing here
// allocates unless the call fails.
func ReaderReadBatch(handle int64, indices unsafe.Pointer, n uint64, dst unsafe.Pointer, dstLen uint64, sizes unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_read_batch"
	r, idx, out, err := batchArgs(fn, handle, indices, n, sizes)
	if err != nil {
		return fail(err)
	}
	buf, err := cArray[byte](fn, "dst", dst, dstLen)
	if err != nil {
		return fail(err)
	}
	if err := r.ReadBatch(idx, buf, out); err != nil {
		return fail(err)
	}
	return StatusOK
}

// batchArgs resolves the reader and the indices and sizes arrays shared by the batch calls.
func batchArgs(fn string, handle int64, indices unsafe.Pointer, n uint64, sizes unsafe.Pointer) (*core.Reader, []uint64, []uint64, error) {
	r, err := readers.get(fn, handle)
	if err != nil {
		return nil, nil, nil, err
	}
	idx, err := cArray[uint64](fn, "indices", indices, n)
	if err != nil {
		return nil, nil, nil, err
	}
	out, err := cArray[uint64](fn, "sizes", sizes, n)
	if err != nil {
		return nil, nil, nil, err
	}
	return r, idx, out, nil
}

// ReaderVerify implements ffr_reader_verify. When a file's metadata is damaged the core
// still checks the samples, so bad and nbad are filled before that error is returned.
func ReaderVerify(handle int64, start, count uint64, bad unsafe.Pointer, badCap uint64, nbad unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_verify"
	r, err := readers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	dst, err := cArray[uint64](fn, "bad", bad, badCap)
	if err != nil {
		return fail(err)
	}
	if err := outPointer(fn, "nbad", nbad); err != nil {
		return fail(err)
	}
	found := uint64(0)
	err = r.Verify(start, count, func(i uint64) { // called in ascending order
		if found < uint64(len(dst)) {
			dst[found] = i
		}
		found++
	})
	*(*uint64)(nbad) = found
	if err != nil {
		return fail(err)
	}
	return StatusOK
}
