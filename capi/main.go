// Command capi is libffrecord, the C ABI of ffrecord, built with
//
//	go build -buildmode=c-shared -o python/ffrecord/libffrecord.so ./capi
//
// The contract is the hand-written ffrecord.h, included below so that the C compiler
// rejects any export whose signature drifts from it. Each export only converts C types
// and calls the function of the same name in internal/abi, where the logic lives.
package main

/*
#include "ffrecord.h"

// cgo cannot spell const: these typedefs let the exports below carry the header's exact
// parameter types.
typedef const char ffr_cchar;
typedef const char *const ffr_cpath;
typedef const void ffr_cvoid;
typedef const uint64_t ffr_cu64;
typedef const int64_t ffr_ci64;
typedef const void *const ffr_cbuffer;
*/
import "C"

import (
	"unsafe"

	"github.com/ffrecord/ffrecord/capi/internal/abi"
)

func main() {}

//export ffr_version
func ffr_version(buf *C.char, size C.size_t, abiVersion *C.int32_t) C.int32_t {
	return C.int32_t(abi.LibraryVersion(unsafe.Pointer(buf), uintptr(size), unsafe.Pointer(abiVersion)))
}

//export ffr_errmsg
func ffr_errmsg(buf *C.char, size C.size_t, needed *C.size_t) C.int32_t {
	return C.int32_t(abi.Errmsg(unsafe.Pointer(buf), uintptr(size), unsafe.Pointer(needed)))
}

//export ffr_oserror
func ffr_oserror(errno *C.int32_t, path *C.char, size C.size_t, needed *C.size_t) C.int32_t {
	return C.int32_t(abi.OSError(unsafe.Pointer(errno), unsafe.Pointer(path), uintptr(size), unsafe.Pointer(needed)))
}

//export ffr_open_handles
func ffr_open_handles(count *C.uint64_t) C.int32_t {
	return C.int32_t(abi.OpenHandles(unsafe.Pointer(count)))
}

//export ffr_crc32c
func ffr_crc32c(crc C.uint32_t, data *C.ffr_cvoid, size C.uint64_t, out *C.uint32_t) C.int32_t {
	return C.int32_t(abi.CRC32C(uint32(crc), unsafe.Pointer(data), uint64(size), unsafe.Pointer(out)))
}

//export ffr_permute
func ffr_permute(n, seed, epoch C.uint64_t, positions *C.ffr_ci64, count C.uint64_t, out *C.int64_t) C.int32_t {
	return C.int32_t(abi.Permute(uint64(n), uint64(seed), uint64(epoch), unsafe.Pointer(positions), uint64(count), unsafe.Pointer(out)))
}

//export ffr_dataset_files
func ffr_dataset_files(dir *C.ffr_cchar, buf *C.char, size C.size_t, needed *C.size_t) C.int32_t {
	return C.int32_t(abi.DatasetFiles(unsafe.Pointer(dir), unsafe.Pointer(buf), uintptr(size), unsafe.Pointer(needed)))
}

//export ffr_dataset_urls
func ffr_dataset_urls(url *C.ffr_cchar, options *C.ffr_cchar, buf *C.char, size C.size_t, needed *C.size_t) C.int32_t {
	return C.int32_t(abi.DatasetURLs(unsafe.Pointer(url), unsafe.Pointer(options), unsafe.Pointer(buf), uintptr(size), unsafe.Pointer(needed)))
}

//export ffr_part_name
func ffr_part_name(k C.uint64_t, nparts C.uint64_t, buf *C.char, size C.size_t, needed *C.size_t) C.int32_t {
	return C.int32_t(abi.PartName(uint64(k), uint64(nparts), unsafe.Pointer(buf), uintptr(size), unsafe.Pointer(needed)))
}

//export ffr_writer_create
func ffr_writer_create(path *C.ffr_cchar, n C.uint64_t, compression C.int32_t, handle *C.int64_t) C.int32_t {
	return C.int32_t(abi.WriterCreate(unsafe.Pointer(path), uint64(n), int32(compression), unsafe.Pointer(handle)))
}

//export ffr_writer_set_durable
func ffr_writer_set_durable(handle C.int64_t, durable C.int32_t) C.int32_t {
	return C.int32_t(abi.WriterSetDurable(int64(handle), int32(durable)))
}

//export ffr_writer_write
func ffr_writer_write(handle C.int64_t, data *C.ffr_cvoid, size C.uint64_t) C.int32_t {
	return C.int32_t(abi.WriterWrite(int64(handle), unsafe.Pointer(data), uint64(size)))
}

//export ffr_writer_write_batch
func ffr_writer_write_batch(handle C.int64_t, data *C.ffr_cvoid, sizes *C.ffr_cu64, n C.uint64_t) C.int32_t {
	return C.int32_t(abi.WriterWriteBatch(int64(handle), unsafe.Pointer(data), unsafe.Pointer(sizes), uint64(n)))
}

//export ffr_writer_write_vectors
func ffr_writer_write_vectors(handle C.int64_t, data *C.ffr_cbuffer, sizes *C.ffr_cu64, n C.uint64_t) C.int32_t {
	return C.int32_t(abi.WriterWriteVectors(int64(handle), unsafe.Pointer(data), unsafe.Pointer(sizes), uint64(n)))
}

//export ffr_writer_count
func ffr_writer_count(handle C.int64_t, count *C.uint64_t) C.int32_t {
	return C.int32_t(abi.WriterCount(int64(handle), unsafe.Pointer(count)))
}

//export ffr_writer_close
func ffr_writer_close(handle C.int64_t) C.int32_t {
	return C.int32_t(abi.WriterClose(int64(handle)))
}

//export ffr_writer_abort
func ffr_writer_abort(handle C.int64_t) C.int32_t {
	return C.int32_t(abi.WriterAbort(int64(handle)))
}

//export ffr_reader_open
func ffr_reader_open(paths *C.ffr_cpath, npaths C.uint64_t, flags C.uint32_t, handle *C.int64_t) C.int32_t {
	return C.int32_t(abi.ReaderOpen(unsafe.Pointer(paths), uint64(npaths), uint32(flags), unsafe.Pointer(handle)))
}

//export ffr_reader_open_verified
func ffr_reader_open_verified(paths *C.ffr_cpath, npaths C.uint64_t, flags C.uint32_t, ids *C.ffr_cu64, nids C.uint64_t, handle *C.int64_t) C.int32_t {
	return C.int32_t(abi.ReaderOpenVerified(unsafe.Pointer(paths), uint64(npaths), uint32(flags), unsafe.Pointer(ids), uint64(nids), unsafe.Pointer(handle)))
}

//export ffr_reader_verified
func ffr_reader_verified(handle C.int64_t, ids *C.uint64_t, nids C.uint64_t, needed *C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderVerified(int64(handle), unsafe.Pointer(ids), uint64(nids), unsafe.Pointer(needed)))
}

//export ffr_reader_open_options
func ffr_reader_open_options(paths *C.ffr_cpath, npaths C.uint64_t, flags C.uint32_t, options *C.ffr_cchar, handle *C.int64_t) C.int32_t {
	return C.int32_t(abi.ReaderOpenOptions(unsafe.Pointer(paths), uint64(npaths), uint32(flags), unsafe.Pointer(options), unsafe.Pointer(handle)))
}

//export ffr_upload
func ffr_upload(path *C.ffr_cchar, url *C.ffr_cchar, options *C.ffr_cchar) C.int32_t {
	return C.int32_t(abi.Upload(unsafe.Pointer(path), unsafe.Pointer(url), unsafe.Pointer(options)))
}

//export ffr_check_url
func ffr_check_url(url *C.ffr_cchar) C.int32_t {
	return C.int32_t(abi.CheckURL(unsafe.Pointer(url)))
}

//export ffr_locate
func ffr_locate(path *C.ffr_cchar, kind *C.uint32_t, buf *C.char, size C.size_t, needed *C.size_t) C.int32_t {
	return C.int32_t(abi.Locate(unsafe.Pointer(path), unsafe.Pointer(kind), unsafe.Pointer(buf), uintptr(size), unsafe.Pointer(needed)))
}

//export ffr_check_options
func ffr_check_options(options *C.ffr_cchar) C.int32_t {
	return C.int32_t(abi.CheckOptions(unsafe.Pointer(options)))
}

//export ffr_put_new
func ffr_put_new(url *C.ffr_cchar, options *C.ffr_cchar, data *C.ffr_cvoid, size C.uint64_t) C.int32_t {
	return C.int32_t(abi.PutNew(unsafe.Pointer(url), unsafe.Pointer(options), unsafe.Pointer(data), uint64(size)))
}

//export ffr_remove
func ffr_remove(url *C.ffr_cchar, options *C.ffr_cchar) C.int32_t {
	return C.int32_t(abi.Remove(unsafe.Pointer(url), unsafe.Pointer(options)))
}

//export ffr_remove_if_holds
func ffr_remove_if_holds(url *C.ffr_cchar, options *C.ffr_cchar, data *C.ffr_cvoid, size C.uint64_t) C.int32_t {
	return C.int32_t(abi.RemoveIfHolds(unsafe.Pointer(url), unsafe.Pointer(options), unsafe.Pointer(data), uint64(size)))
}

//export ffr_fetch_text
func ffr_fetch_text(url *C.ffr_cchar, options *C.ffr_cchar, buf *C.char, size C.size_t, needed *C.size_t) C.int32_t {
	return C.int32_t(abi.FetchText(unsafe.Pointer(url), unsafe.Pointer(options), unsafe.Pointer(buf), uintptr(size), unsafe.Pointer(needed)))
}

//export ffr_fetched_text
func ffr_fetched_text(url *C.ffr_cchar, options *C.ffr_cchar, buf *C.char, size C.size_t, needed *C.size_t) C.int32_t {
	return C.int32_t(abi.FetchedText(unsafe.Pointer(url), unsafe.Pointer(options), unsafe.Pointer(buf), uintptr(size), unsafe.Pointer(needed)))
}

//export ffr_list
func ffr_list(url *C.ffr_cchar, options *C.ffr_cchar, buf *C.char, size C.size_t, needed *C.size_t) C.int32_t {
	return C.int32_t(abi.ListEntries(unsafe.Pointer(url), unsafe.Pointer(options), unsafe.Pointer(buf), uintptr(size), unsafe.Pointer(needed)))
}

//export ffr_list_objects
func ffr_list_objects(url *C.ffr_cchar, options *C.ffr_cchar, buf *C.char, size C.size_t, needed *C.size_t, requests *C.uint64_t) C.int32_t {
	return C.int32_t(abi.ListObjects(unsafe.Pointer(url), unsafe.Pointer(options), unsafe.Pointer(buf), uintptr(size), unsafe.Pointer(needed), unsafe.Pointer(requests)))
}

//export ffr_describe_file
func ffr_describe_file(path *C.ffr_cchar, options *C.ffr_cchar, stamp *C.uint64_t, etag *C.char, length C.size_t, needed *C.size_t) C.int32_t {
	return C.int32_t(abi.DescribeFile(unsafe.Pointer(path), unsafe.Pointer(options), unsafe.Pointer(stamp), unsafe.Pointer(etag), uintptr(length), unsafe.Pointer(needed)))
}

//export ffr_reader_len
func ffr_reader_len(handle C.int64_t, n *C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderLen(int64(handle), unsafe.Pointer(n)))
}

//export ffr_reader_descriptors
func ffr_reader_descriptors(handle C.int64_t, count *C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderDescriptors(int64(handle), unsafe.Pointer(count)))
}

//export ffr_reader_nfiles
func ffr_reader_nfiles(handle C.int64_t, nfiles *C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderNfiles(int64(handle), unsafe.Pointer(nfiles)))
}

//export ffr_reader_fname
func ffr_reader_fname(handle C.int64_t, i C.uint64_t, buf *C.char, size C.size_t, needed *C.size_t) C.int32_t {
	return C.int32_t(abi.ReaderFname(int64(handle), uint64(i), unsafe.Pointer(buf), uintptr(size), unsafe.Pointer(needed)))
}

//export ffr_reader_file_counts
func ffr_reader_file_counts(handle C.int64_t, counts *C.uint64_t, nfiles C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderFileCounts(int64(handle), unsafe.Pointer(counts), uint64(nfiles)))
}

//export ffr_reader_chunk_bounds
func ffr_reader_chunk_bounds(handle C.int64_t, chunkSize C.uint64_t, bounds *C.uint64_t, capacity C.uint64_t, needed *C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderChunkBounds(int64(handle), uint64(chunkSize), unsafe.Pointer(bounds), uint64(capacity), unsafe.Pointer(needed)))
}

//export ffr_first_request_bytes
func ffr_first_request_bytes(chunkSize C.uint64_t, readAhead C.int32_t, bytes *C.uint64_t) C.int32_t {
	return C.int32_t(abi.FirstRequestBytes(uint64(chunkSize), readAhead != 0, unsafe.Pointer(bytes)))
}

//export ffr_reader_stats
func ffr_reader_stats(handle C.int64_t, stats *C.int64_t, n C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderStats(int64(handle), unsafe.Pointer(stats), uint64(n)))
}

//export ffr_reader_warnings
func ffr_reader_warnings(handle C.int64_t, buf *C.char, size C.size_t, needed *C.size_t) C.int32_t {
	return C.int32_t(abi.ReaderWarnings(int64(handle), unsafe.Pointer(buf), uintptr(size), unsafe.Pointer(needed)))
}

//export ffr_reader_versions
func ffr_reader_versions(handle C.int64_t, buf *C.char, size C.size_t, needed *C.size_t) C.int32_t {
	return C.int32_t(abi.ReaderVersions(int64(handle), unsafe.Pointer(buf), uintptr(size), unsafe.Pointer(needed)))
}

//export ffr_reader_sizes
func ffr_reader_sizes(handle C.int64_t, indices *C.ffr_cu64, n C.uint64_t, sizes *C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderSizes(int64(handle), unsafe.Pointer(indices), uint64(n), unsafe.Pointer(sizes)))
}

//export ffr_reader_read_batch
func ffr_reader_read_batch(handle C.int64_t, indices *C.ffr_cu64, n C.uint64_t, dst unsafe.Pointer, dstLen C.uint64_t, sizes *C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderReadBatch(int64(handle), unsafe.Pointer(indices), uint64(n), dst, uint64(dstLen), unsafe.Pointer(sizes)))
}

//export ffr_reader_prefetch
func ffr_reader_prefetch(handle C.int64_t, indices *C.ffr_cu64, n C.uint64_t, queued *C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderPrefetch(int64(handle), unsafe.Pointer(indices), uint64(n), unsafe.Pointer(queued)))
}

//export ffr_reader_file_info
func ffr_reader_file_info(handle C.int64_t, i C.uint64_t, info *C.uint64_t, ninfo C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderFileInfo(int64(handle), uint64(i), unsafe.Pointer(info), uint64(ninfo)))
}

//export ffr_reader_file_stamp
func ffr_reader_file_stamp(handle C.int64_t, i C.uint64_t, stamp *C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderFileStamp(int64(handle), uint64(i), unsafe.Pointer(stamp)))
}

//export ffr_reader_file_header
func ffr_reader_file_header(handle C.int64_t, i C.uint64_t, offsets *C.uint64_t, checksums *C.uint32_t, n C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderFileHeader(int64(handle), uint64(i), unsafe.Pointer(offsets), unsafe.Pointer(checksums), uint64(n)))
}

//export ffr_readers_read_one
func ffr_readers_read_one(handles *C.ffr_ci64, n C.uint64_t, index C.uint64_t, dst unsafe.Pointer, dstLen C.uint64_t, sizes *C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReadersReadOne(unsafe.Pointer(handles), uint64(n), uint64(index), dst, uint64(dstLen), unsafe.Pointer(sizes)))
}

//export ffr_readers_read_batch
func ffr_readers_read_batch(handles *C.ffr_ci64, indices *C.ffr_cu64, n C.uint64_t, dst unsafe.Pointer, dstLen C.uint64_t, sizes *C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReadersReadBatch(unsafe.Pointer(handles), unsafe.Pointer(indices), uint64(n), dst, uint64(dstLen), unsafe.Pointer(sizes)))
}

//export ffr_reader_read_ranges
func ffr_reader_read_ranges(handle C.int64_t, triples *C.ffr_cu64, n C.uint64_t, dst unsafe.Pointer, dstLen C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderReadRanges(int64(handle), unsafe.Pointer(triples), uint64(n), dst, uint64(dstLen)))
}

//export ffr_reader_read_values
func ffr_reader_read_values(handle C.int64_t, values, width, perBlock C.uint64_t, indices *C.ffr_cu64, n C.uint64_t,
	dst unsafe.Pointer, dstLen C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderReadValues(int64(handle), uint64(values), uint64(width), uint64(perBlock),
		unsafe.Pointer(indices), uint64(n), dst, uint64(dstLen)))
}

//export ffr_reader_read_value_range
func ffr_reader_read_value_range(handle C.int64_t, values, width, perBlock, start, count C.uint64_t,
	dst unsafe.Pointer, dstLen C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderReadValueRange(int64(handle), uint64(values), uint64(width),
		uint64(perBlock), uint64(start), uint64(count), dst, uint64(dstLen)))
}

//export ffr_reader_read_span
func ffr_reader_read_span(handle C.int64_t, start, count C.uint64_t, dst unsafe.Pointer, dstLen C.uint64_t,
	offsets *C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderReadSpan(int64(handle), uint64(start), uint64(count), dst, uint64(dstLen),
		unsafe.Pointer(offsets)))
}

//export ffr_reader_read_windows
func ffr_reader_read_windows(handle C.int64_t, starts *C.ffr_ci64, dataOffsets *C.ffr_cu64, nsamples C.uint64_t,
	itemSize C.uint32_t, separator C.int64_t, blocks *C.ffr_cu64, n C.uint64_t, stride, width C.uint64_t,
	dst *C.int64_t, dstLen C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderReadWindows(int64(handle), unsafe.Pointer(starts), unsafe.Pointer(dataOffsets),
		uint64(nsamples), uint32(itemSize), int64(separator), unsafe.Pointer(blocks), uint64(n), uint64(stride),
		uint64(width), unsafe.Pointer(dst), uint64(dstLen)))
}

//export ffr_reader_verify
func ffr_reader_verify(handle C.int64_t, start, count C.uint64_t, bad *C.uint64_t, reasons *C.int32_t, capacity C.uint64_t,
	text *C.char, textLen C.size_t, nbad, next *C.uint64_t) C.int32_t {
	return C.int32_t(abi.ReaderVerify(int64(handle), uint64(start), uint64(count), unsafe.Pointer(bad), unsafe.Pointer(reasons),
		uint64(capacity), unsafe.Pointer(text), uintptr(textLen), unsafe.Pointer(nbad), unsafe.Pointer(next)))
}

//export ffr_reader_close
func ffr_reader_close(handle C.int64_t) C.int32_t {
	return C.int32_t(abi.ReaderClose(int64(handle)))
}
