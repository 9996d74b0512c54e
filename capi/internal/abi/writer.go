package abi

import (
	"fmt"
	"unsafe"

	"github.com/ffrecord/ffrecord/core"
)

// WriterCreate implements ffr_writer_create.
func WriterCreate(path unsafe.Pointer, n uint64, compression int32, handle unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_writer_create"
	if path == nil {
		return failf(StatusInvalid, fn+": path is NULL")
	}
	if err := outPointer(fn, "handle", handle); err != nil {
		return fail(err)
	}
	if compression != CompressNone && compression != CompressLZ4 && compression != CompressZstd {
		return failf(StatusInvalid, fmt.Sprintf("%s: unknown compression %d", fn, compression))
	}
	name := cString(path)
	w, err := core.Create(name, n, core.WriterOptions{Compression: core.Compression(compression)})
	if err != nil {
		return fail(err)
	}
	*(*int64)(handle) = writers.add(w)
	return StatusOK
}

// WriterSetDurable implements ffr_writer_set_durable.
func WriterSetDurable(handle int64, durable int32) (status int32) {
	defer recoverPanic(&status)
	w, err := writers.get("ffr_writer_set_durable", handle)
	if err != nil {
		return fail(err)
	}
	w.SetDurable(durable != 0)
	return StatusOK
}

// WriterWrite implements ffr_writer_write. The core copies or writes out the sample
// before returning, so the caller's buffer is free again when this returns. A core.Writer
// serialises concurrent calls itself.
func WriterWrite(handle int64, data unsafe.Pointer, size uint64) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_writer_write"
	w, err := writers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	sample, err := cArray[byte](fn, "data", data, size)
	if err != nil {
		return fail(err)
	}
	if err := w.WriteOne(sample); err != nil {
		return fail(err)
	}
	return StatusOK
}

// writerAndSizes is the writer behind handle and the n sample sizes of a batched write.
func writerAndSizes(fn string, handle int64, sizes unsafe.Pointer, n uint64) (*core.Writer, []uint64, error) {
	w, err := writers.get(fn, handle)
	if err != nil {
		return nil, nil, err
	}
	lengths, err := cArray[uint64](fn, "sizes", sizes, n)
	return w, lengths, err
}

// WriterWriteBatch implements ffr_writer_write_batch: n samples stored back to back in
// data, sizes[k] bytes each, written by the core as one batch.
func WriterWriteBatch(handle int64, data, sizes unsafe.Pointer, n uint64) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_writer_write_batch"
	w, lengths, err := writerAndSizes(fn, handle, sizes, n)
	if err != nil {
		return fail(err)
	}
	total := uint64(0)
	for _, size := range lengths {
		if size > maxSpan-total {
			return failf(StatusInvalid, fmt.Sprintf("%s: the sizes add up to more than any buffer", fn))
		}
		total += size
	}
	stored, err := cArray[byte](fn, "data", data, total)
	if err != nil {
		return fail(err)
	}
	if err := w.WriteBatch(stored, lengths); err != nil {
		return fail(err)
	}
	return StatusOK
}

// WriterWriteVectors implements ffr_writer_write_vectors: n samples, sample k the sizes[k]
// bytes at data[k], written by the core as one batch from where they are.
func WriterWriteVectors(handle int64, data, sizes unsafe.Pointer, n uint64) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_writer_write_vectors"
	w, lengths, err := writerAndSizes(fn, handle, sizes, n)
	if err != nil {
		return fail(err)
	}
	ptrs, err := cArray[unsafe.Pointer](fn, "data", data, n)
	if err != nil {
		return fail(err)
	}
	samples := make([][]byte, n)
	for k, p := range ptrs {
		if samples[k], err = cArray[byte](fn, fmt.Sprintf("data[%d]", k), p, lengths[k]); err != nil {
			return fail(err)
		}
	}
	if err := w.WriteVectors(samples); err != nil {
		return fail(err)
	}
	return StatusOK
}

// WriterCount implements ffr_writer_count.
func WriterCount(handle int64, count unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_writer_count"
	w, err := writers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	if err := outPointer(fn, "count", count); err != nil {
		return fail(err)
	}
	*(*uint64)(count) = w.Count()
	return StatusOK
}

// WriterClose implements ffr_writer_close.
func WriterClose(handle int64) (status int32) {
	return finishWriter("ffr_writer_close", handle, (*core.Writer).Close)
}

// WriterAbort implements ffr_writer_abort.
func WriterAbort(handle int64) (status int32) {
	return finishWriter("ffr_writer_abort", handle, (*core.Writer).Abort)
}

// finishWriter frees the handle first, so that it is gone whatever finish returns; writes
// still in flight on other threads complete or fail with ErrClosed inside the core. A
// handle closed before is left alone: closing twice, or aborting after a close, succeeds.
func finishWriter(fn string, handle int64, finish func(*core.Writer) error) (status int32) {
	defer recoverPanic(&status)
	w, open, err := writers.release(fn, handle)
	if err != nil {
		return fail(err)
	}
	if open {
		if err := finish(w); err != nil {
			return fail(err)
		}
	}
	return StatusOK
}
