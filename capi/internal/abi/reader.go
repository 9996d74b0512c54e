package abi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/ffrecord/ffrecord/core"
)

// ReaderOpen implements ffr_reader_open.
func ReaderOpen(paths unsafe.Pointer, npaths uint64, flags uint32, handle unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	return readerOpen("ffr_reader_open", paths, npaths, flags, nil, nil, handle)
}

// identityWords is how many uint64 words one core.FileIdentity takes in the ABI.
const identityWords = 5

// ReaderOpenVerified implements ffr_reader_open_verified.
func ReaderOpenVerified(paths unsafe.Pointer, npaths uint64, flags uint32, ids unsafe.Pointer, nids uint64, handle unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_open_verified"
	words, err := cArray[uint64](fn, "ids", ids, nids)
	if err != nil {
		return fail(err)
	}
	if nids%identityWords != 0 {
		return failf(StatusInvalid, fmt.Sprintf("%s: nids %d is not a multiple of %d", fn, nids, identityWords))
	}
	vouched := make([]core.FileIdentity, 0, nids/identityWords)
	for w := words; len(w) > 0; w = w[identityWords:] {
		vouched = append(vouched, core.FileIdentity{
			Dev: w[0], Ino: w[1], Size: w[2], MtimeNs: int64(w[3]), CtimeNs: int64(w[4]),
		})
	}
	return readerOpen(fn, paths, npaths, flags, vouched, nil, handle)
}

// ReaderVerified implements ffr_reader_verified.
func ReaderVerified(handle int64, ids unsafe.Pointer, nids uint64, needed unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_verified"
	r, err := readers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	if err := outPointer(fn, "needed", needed); err != nil {
		return fail(err)
	}
	dst, err := cArray[uint64](fn, "ids", ids, nids)
	if err != nil {
		return fail(err)
	}
	have := r.Verified()
	*(*uint64)(needed) = uint64(len(have)) * identityWords
	if len(dst) < len(have)*identityWords {
		return failf(StatusShortBuf, fmt.Sprintf("%s: room for %d words, the identities take %d", fn, len(dst), len(have)*identityWords))
	}
	for k, id := range have {
		copy(dst[k*identityWords:], []uint64{id.Dev, id.Ino, id.Size, uint64(id.MtimeNs), uint64(id.CtimeNs)})
	}
	return StatusOK
}

// readerOpen opens a reader for ffr_reader_open, ffr_reader_open_verified and
// ffr_reader_open_options (called fn; options: NULL for the defaults, else a JSON object of
// storage options).
func readerOpen(fn string, paths unsafe.Pointer, npaths uint64, flags uint32, vouched []core.FileIdentity, options, handle unsafe.Pointer) int32 {
	ptrs, err := cArray[unsafe.Pointer](fn, "paths", paths, npaths)
	if err != nil {
		return fail(err)
	}
	if err := outPointer(fn, "handle", handle); err != nil {
		return fail(err)
	}
	if unknown := flags &^ (FlagCheckData | FlagDirect | FlagNoDescriptors); unknown != 0 {
		return failf(StatusInvalid, fmt.Sprintf("%s: unknown flags %#x", fn, unknown))
	}
	remoteOpts, err := storageOptions(fn, options)
	if err != nil {
		return fail(err)
	}
	names := make([]string, len(ptrs))
	for i, p := range ptrs {
		if p == nil {
			return failf(StatusInvalid, fmt.Sprintf("%s: paths[%d] is NULL", fn, i))
		}
		names[i] = cString(p)
	}
	r, err := core.Open(names, core.ReaderOptions{
		CheckData:     flags&FlagCheckData != 0,
		Direct:        flags&FlagDirect != 0,
		NoDescriptors: flags&FlagNoDescriptors != 0,
		Verified:      vouched,
		Remote:        remoteOpts,
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

// ReaderDescriptors implements ffr_reader_descriptors.
func ReaderDescriptors(handle int64, count unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	return readerScalar("ffr_reader_descriptors", handle, "count", count, (*core.Reader).Descriptors)
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

// ReaderVersions implements ffr_reader_versions.
func ReaderVersions(handle int64, buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_versions"
	r, err := readers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	text, err := json.Marshal(r.Versions())
	if err != nil {
		return fail(err)
	}
	return copyOutText(fn, string(text), buf, size, needed)
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

// ReadersReadOne implements ffr_readers_read_one: sample index of each of n readers, back
// to back into dst (a structured dataset's datapoint, one file per field, in one call).
func ReadersReadOne(handles unsafe.Pointer, n uint64, index uint64, dst unsafe.Pointer, dstLen uint64, sizes unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_readers_read_one"
	hs, err := cArray[int64](fn, "handles", handles, n)
	if err != nil {
		return fail(err)
	}
	same := make([]uint64, n)
	for k := range same {
		same[k] = index
	}
	return readPairs(fn, hs, same, dst, dstLen, sizes)
}

// ReadersReadBatch implements ffr_readers_read_batch: sample indices[k] of reader
// handles[k] for each k, back to back into dst (a batch gathered from many datasets, such
// as a mixture's, in one call).
func ReadersReadBatch(handles, indices unsafe.Pointer, n uint64, dst unsafe.Pointer, dstLen uint64, sizes unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_readers_read_batch"
	hs, err := cArray[int64](fn, "handles", handles, n)
	if err != nil {
		return fail(err)
	}
	idx, err := cArray[uint64](fn, "indices", indices, n)
	if err != nil {
		return fail(err)
	}
	return readPairs(fn, hs, idx, dst, dstLen, sizes)
}

// readPairs reads sample idx[k] of reader hs[k] for each k, back to back into dst, in one
// core.ReadAcross: when dst is too small, every size is filled.
func readPairs(fn string, hs []int64, idx []uint64, dst unsafe.Pointer, dstLen uint64, sizes unsafe.Pointer) int32 {
	out, err := cArray[uint64](fn, "sizes", sizes, uint64(len(hs)))
	if err != nil {
		return fail(err)
	}
	buf, err := cArray[byte](fn, "dst", dst, dstLen)
	if err != nil {
		return fail(err)
	}
	rs := make([]*core.Reader, len(hs))
	if err := readers.getEach(fn, hs, rs); err != nil {
		return fail(err)
	}
	if err := core.ReadAcross(rs, idx, buf, out); err != nil {
		return fail(fmt.Errorf("%s: %w", fn, err))
	}
	return StatusOK
}

// ReaderReadRanges implements ffr_reader_read_ranges: triples is n (index, offset, length)
// triples of uint64, the memory layout of core.Range.
func ReaderReadRanges(handle int64, triples unsafe.Pointer, n uint64, dst unsafe.Pointer, dstLen uint64) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_read_ranges"
	r, err := readers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	ranges, err := cArray[core.Range](fn, "triples", triples, n)
	if err != nil {
		return fail(err)
	}
	buf, err := cArray[byte](fn, "dst", dst, dstLen)
	if err != nil {
		return fail(err)
	}
	if err := r.ReadRanges(ranges, buf); err != nil {
		return fail(err)
	}
	return StatusOK
}

// ReaderReadValues implements ffr_reader_read_values: the values indices[0..n) of a column
// file of values values of width bytes, perBlock to a block, back to back into dst.
func ReaderReadValues(handle int64, values, width, perBlock uint64, indices unsafe.Pointer, n uint64,
	dst unsafe.Pointer, dstLen uint64) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_read_values"
	r, buf, err := columnArgs(fn, handle, dst, dstLen)
	if err != nil {
		return fail(err)
	}
	idx, err := cArray[uint64](fn, "indices", indices, n)
	if err != nil {
		return fail(err)
	}
	if err := r.ReadValues(core.Column{Values: values, Width: width, PerBlock: perBlock}, idx, buf); err != nil {
		return fail(err)
	}
	return StatusOK
}

// ReaderReadValueRange implements ffr_reader_read_value_range: values [start, start+count)
// of a column file (layout as for ReaderReadValues) into dst.
func ReaderReadValueRange(handle int64, values, width, perBlock, start, count uint64, dst unsafe.Pointer,
	dstLen uint64) (status int32) {
	defer recoverPanic(&status)
	r, buf, err := columnArgs("ffr_reader_read_value_range", handle, dst, dstLen)
	if err != nil {
		return fail(err)
	}
	c := core.Column{Values: values, Width: width, PerBlock: perBlock}
	if err := r.ReadValueRange(c, start, count, buf); err != nil {
		return fail(err)
	}
	return StatusOK
}

// ReaderReadSpan implements ffr_reader_read_span: samples [start, start+count) back to
// back into dst, where each begins in offsets (count+1 of them).
func ReaderReadSpan(handle int64, start, count uint64, dst unsafe.Pointer, dstLen uint64, offsets unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_read_span"
	r, buf, err := columnArgs(fn, handle, dst, dstLen)
	if err != nil {
		return fail(err)
	}
	if count == ^uint64(0) {
		return fail(&callError{StatusInvalid, fmt.Sprintf("%s: count %d is larger than any dataset", fn, count)})
	}
	out, err := cArray[uint64](fn, "offsets", offsets, count+1)
	if err != nil {
		return fail(err)
	}
	if err := r.ReadSpan(start, count, buf, out); err != nil {
		return fail(err)
	}
	return StatusOK
}

// columnArgs resolves the reader and the destination buffer of the column and span calls.
func columnArgs(fn string, handle int64, dst unsafe.Pointer, dstLen uint64) (*core.Reader, []byte, error) {
	r, err := readers.get(fn, handle)
	if err != nil {
		return nil, nil, err
	}
	buf, err := cArray[byte](fn, "dst", dst, dstLen)
	return r, buf, err
}

// ReaderReadWindows implements ffr_reader_read_windows.
func ReaderReadWindows(handle int64, starts, dataOffsets unsafe.Pointer, nsamples uint64, itemSize uint32, separator int64,
	blocks unsafe.Pointer, n, stride, width uint64, dst unsafe.Pointer, dstLen uint64) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_read_windows"
	r, err := readers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	if nsamples == math.MaxUint64 {
		return fail(&callError{StatusInvalid, fn + ": nsamples is larger than any buffer"})
	}
	stream := core.ItemStream{ItemSize: int(itemSize), Separator: separator}
	if stream.Starts, err = cArray[int64](fn, "starts", starts, nsamples+1); err != nil {
		return fail(err)
	}
	if stream.DataOffsets, err = cArray[uint64](fn, "data_offsets", dataOffsets, nsamples); err != nil {
		return fail(err)
	}
	idx, err := cArray[uint64](fn, "blocks", blocks, n)
	if err != nil {
		return fail(err)
	}
	out, err := cArray[int64](fn, "dst", dst, dstLen/8)
	if err != nil {
		return fail(err)
	}
	if err := r.ReadWindows(stream, idx, stride, width, out); err != nil {
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

// ReaderPrefetch implements ffr_reader_prefetch.
func ReaderPrefetch(handle int64, indices unsafe.Pointer, n uint64, queued unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_prefetch"
	r, err := readers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	if err := outPointer(fn, "queued", queued); err != nil {
		return fail(err)
	}
	idx, err := cArray[uint64](fn, "indices", indices, n)
	if err != nil {
		return fail(err)
	}
	// The core keeps no reference to the caller's array past the call.
	k, err := r.Prefetch(idx)
	if err != nil {
		return fail(err)
	}
	*(*uint64)(queued) = uint64(k)
	return StatusOK
}

// ReaderVerify implements ffr_reader_verify: one page of the core's Verify, which stops at
// the first bad sample the caller's arrays have no room for.
func ReaderVerify(handle int64, start, count uint64, bad, reasons unsafe.Pointer, capacity uint64,
	text unsafe.Pointer, textLen uintptr, nbad, next unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_verify"
	r, err := readers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	indices, err := cArray[uint64](fn, "bad", bad, capacity)
	if err != nil {
		return fail(err)
	}
	classes, err := cArray[int32](fn, "reasons", reasons, capacity)
	if err != nil {
		return fail(err)
	}
	messages, err := cArray[byte](fn, "text", text, uint64(textLen))
	if err != nil {
		return fail(err)
	}
	if err := outPointer(fn, "nbad", nbad); err != nil {
		return fail(err)
	}
	if err := outPointer(fn, "next", next); err != nil {
		return fail(err)
	}
	found, used := uint64(0), 0
	stop, stopped := start, false
	err = r.Verify(start, count, func(b core.BadSample) bool {
		var msg string
		if messages != nil { // worded only when asked for: counting many is then cheap
			msg = b.Err.Error()
		}
		if found == capacity || (messages != nil && len(msg) >= len(messages)-used) {
			stop, stopped = b.Index, true
			return false
		}
		indices[found], classes[found] = b.Index, StatusCorrupt
		if errors.Is(b.Err, core.ErrChecksum) { // statusOf's reflection costs more, per sample
			classes[found] = StatusChecksum
		}
		if messages != nil {
			used += copy(messages[used:], msg)
			messages[used] = 0
			used++
		}
		found++
		return true
	})
	if !stopped && (err == nil || core.IsCorruption(err)) {
		stop = start + count // a range accepted by the core does not overflow
	}
	*(*uint64)(nbad), *(*uint64)(next) = found, stop
	switch {
	case err != nil:
		return fail(err)
	case stopped && found == 0 && capacity > 0:
		return failf(StatusShortBuf, fmt.Sprintf("%s: the message about sample %d does not fit a text buffer of %d bytes",
			fn, stop, textLen))
	}
	return StatusOK
}

// ReaderFileInfo implements ffr_reader_file_info: the fields the caller has room for, in
// the order of the FFR_INFO_* indices.
func ReaderFileInfo(handle int64, i uint64, info unsafe.Pointer, ninfo uint64) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_file_info"
	r, err := readers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	dst, err := cArray[uint64](fn, "info", info, ninfo)
	if err != nil {
		return fail(err)
	}
	if i >= uint64(len(r.Files())) {
		return failf(StatusIndex, fmt.Sprintf("%s: file %d out of range [0, %d)", fn, i, len(r.Files())))
	}
	fi, err := r.FileInfo(int(i))
	if err != nil {
		return fail(err)
	}
	fields := [InfoFields]uint64{
		InfoSamples:     fi.Samples,
		InfoStored:      fi.Stored,
		InfoCompression: uint64(fi.Compression),
		InfoHeaderBytes: fi.HeaderBytes,
		InfoDataBytes:   fi.DataBytes,
		InfoFileBytes:   fi.FileBytes,
		InfoMetadata:    uint64(fi.Metadata),
		InfoReadFrom:    uint64(fi.ReadFrom),
	}
	copy(dst, fields[:])
	return StatusOK
}

// ReaderFileStamp implements ffr_reader_file_stamp.
func ReaderFileStamp(handle int64, i uint64, stamp unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_file_stamp"
	r, err := readers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	if err := outPointer(fn, "stamp", stamp); err != nil {
		return fail(err)
	}
	if i >= uint64(len(r.Files())) {
		return failf(StatusIndex, fmt.Sprintf("%s: file %d out of range [0, %d)", fn, i, len(r.Files())))
	}
	s, err := r.FileStamp(int(i))
	if err != nil {
		return fail(err)
	}
	putStamp(stamp, s)
	return StatusOK
}

// putStamp writes a file's stamp as the C ABI gives it: size, stored count, checksum.
func putStamp(dst unsafe.Pointer, s core.FileStamp) {
	out := unsafe.Slice((*uint64)(dst), 3)
	out[0], out[1], out[2] = s.Bytes, s.Stored, uint64(s.HeaderChecksum)
}

// ReaderFileHeader implements ffr_reader_file_header: the stored tables of file i, for a
// capacity of n samples (offsets holds n+1 entries, checksums n).
func ReaderFileHeader(handle int64, i uint64, offsets, checksums unsafe.Pointer, n uint64) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_reader_file_header"
	r, err := readers.get(fn, handle)
	if err != nil {
		return fail(err)
	}
	if n == math.MaxUint64 {
		return failf(StatusInvalid, fmt.Sprintf("%s: capacity %d is larger than any buffer", fn, n))
	}
	offs, err := cArray[uint64](fn, "offsets", offsets, n+1)
	if err != nil {
		return fail(err)
	}
	sums, err := cArray[uint32](fn, "checksums", checksums, n)
	if err != nil {
		return fail(err)
	}
	if i >= uint64(len(r.Files())) {
		return failf(StatusIndex, fmt.Sprintf("%s: file %d out of range [0, %d)", fn, i, len(r.Files())))
	}
	if err := r.FileHeader(int(i), offs, sums); err != nil {
		return fail(fmt.Errorf("%s: %w", fn, err))
	}
	return StatusOK
}
