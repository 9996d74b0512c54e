/*
 * ffrecord.h — the C ABI of libffrecord, the Go core of ffrecord.
 *
 * This header is the contract: the Python package (ffrecord/_lib.py) declares exactly
 * these signatures with ctypes. Change both together, and bump FFR_ABI_VERSION on any
 * incompatible change.
 *
 * Conventions
 *   - Every function returns an int32_t status: FFR_OK (0) or a negative FFR_E_* class.
 *   - On failure, the calling OS thread's record of its last failure is replaced: ask
 *     ffr_errmsg() for its message and, for FFR_E_IO and FFR_E_NOTFOUND, ffr_oserror() for
 *     the errno and path behind it, from the same thread. A record stays until that thread
 *     fails again (successful calls leave it alone; reading it does not clear it). Records
 *     are kept for the 1024 threads that failed most recently, so a thread that fails and
 *     exits without asking costs nothing for long.
 *   - Readers and writers are int64_t handles (> 0) into a table guarded inside the
 *     library. No pointer into library memory is ever returned. Pointers passed in are
 *     used only for the duration of the call and never kept.
 *   - Sample indices are 0-based uint64_t over the whole dataset (all files of a reader).
 *   - Handles are safe to use from many threads at once. Using a closed handle returns
 *     FFR_E_CLOSED (FFR_E_HANDLE if it was never valid), except that closing it again (or
 *     aborting a closed writer) does nothing and returns FFR_OK, for readers and writers
 *     alike. Reader and writer handles never coincide: a writer handle given to a reader
 *     function (or the reverse) is FFR_E_HANDLE.
 *   - Output pointers (handle, count, n, needed, nbad, abi_version, ...) must not be NULL;
 *     an input array may be NULL only when its length is 0. Otherwise the call fails with
 *     FFR_E_INVALID.
 *   - The library holds a Go runtime. It does not survive fork(): a child process must load
 *     its own copy of the library (from a different inode) and reopen what it needs.
 */
#ifndef FFRECORD_H
#define FFRECORD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FFR_ABI_VERSION 2

/* Status codes. The Python mapping is given for each; an FFR_E_IO or FFR_E_NOTFOUND whose
 * failure has an errno (ffr_oserror) becomes the OSError subclass Python gives that errno
 * (PermissionError, NotADirectoryError, ...). */
#define FFR_OK            0
#define FFR_E_INVALID    -1 /* bad argument or API misuse               -> ValueError            */
#define FFR_E_INDEX      -2 /* sample index out of range                -> IndexError            */
#define FFR_E_IO         -3 /* operating-system error (ffr_oserror)     -> OSError               */
#define FFR_E_NOTFOUND   -4 /* a path does not exist (ffr_oserror)      -> FileNotFoundError     */
#define FFR_E_CORRUPT    -5 /* structure of a file is broken            -> CorruptFileError      */
#define FFR_E_CHECKSUM   -6 /* a stored CRC-32 does not match           -> CorruptFileError      */
#define FFR_E_CLOSED     -7 /* handle was closed                        -> ValueError            */
#define FFR_E_HANDLE     -8 /* handle was never valid                   -> ValueError            */
#define FFR_E_SHORTBUF   -9 /* destination buffer too small             -> ValueError            */
#define FFR_E_INTERNAL  -10 /* a bug in the library (a recovered panic) -> RuntimeError          */

/* Reader open flags. */
#define FFR_CHECK_DATA  1u /* validate metadata CRC at open and each sample's CRC on read */
#define FFR_DIRECT      2u /* read sample data with O_DIRECT (page cache bypassed)        */
/* FFR_NO_DESCRIPTORS asks that local files hold no file descriptor once opened and checked,
 * so that a process can keep thousands of files open under a small RLIMIT_NOFILE: each
 * file's samples are then copied from its read-only shared mapping (batches, single reads,
 * ranges, windows, verify; a prefetch advises the mapping). The mapping keeps the opened
 * version readable: a file replaced by rename goes on reading as opened, and reading one
 * truncated since fails with FFR_E_CORRUPT. It is a request: files keep their descriptors
 * with FFR_DIRECT, and so do the files past the first ones (in order) whose sizes fit in
 * the 256 MiB a reader maps for sample data (a larger dataset is read with system calls);
 * remote files hold none. ffr_reader_descriptors says how many a reader holds. */
#define FFR_NO_DESCRIPTORS 4u

/* Writer compression (see core's format spec for the extension record). */
#define FFR_COMPRESS_NONE 0
#define FFR_COMPRESS_LZ4  1
#define FFR_COMPRESS_ZSTD 2 /* Zstandard frames; same extension record, compression 2 */

/* Fields of ffr_reader_file_info: indices into its info array. */
#define FFR_INFO_SAMPLES      0 /* samples a reader shows                                    */
#define FFR_INFO_STORED       1 /* samples in the header, an extension record included      */
#define FFR_INFO_COMPRESSION  2 /* FFR_COMPRESS_LZ4 or _ZSTD with an extension record (the  *
                                 * compression of its samples: LZ4 when none shrank)          */
#define FFR_INFO_HEADER_BYTES 3 /* bytes of the header (checksums and offsets)               */
#define FFR_INFO_DATA_BYTES   4 /* bytes of sample data as stored (compressed, the record)   */
#define FFR_INFO_FILE_BYTES   5 /* bytes of the file                                         */
#define FFR_INFO_METADATA     6 /* FFR_METADATA_*: what the metadata checksum says           */
#define FFR_INFO_READ_FROM    7 /* FFR_READ_*: where its sample data is read from            */
#define FFR_INFO_FIELDS       8 /* how many fields this version fills                        */

/* Values of FFR_INFO_METADATA. */
#define FFR_METADATA_INTACT  0 /* the metadata checksum (and extension record's) match      */
#define FFR_METADATA_LEGACY  1 /* stored checksum 0 (an old writer): the header is unchecked */
#define FFR_METADATA_DAMAGED 2 /* a checksum does not match: ffr_reader_verify says why     */

/* Values of FFR_INFO_READ_FROM. */
#define FFR_READ_LOCAL  0 /* a local file                                                 */
#define FFR_READ_REMOTE 1 /* an object, by range requests in every process and epoch      */
#define FFR_READ_CACHED 2 /* an object, through the node's chunk cache (cache_dir)        */

/* ---- library ------------------------------------------------------------------------ */

/* Sets *abi_version to the FFR_ABI_VERSION the library was built with (whatever else
 * happens), and copies the library version ("1.2.3") into buf, always NUL-terminated;
 * FFR_E_SHORTBUF when len is too small for it and its NUL. buf may be NULL with len 0 to
 * ask only for the ABI version. A caller checks *abi_version before any other call: ABI
 * version 1 had ffr_version(buf, len) return it instead of a status. */
int32_t ffr_version(char *buf, size_t len, int32_t *abi_version);

/* Copies the message of the calling thread's last failure into buf, always NUL-terminated
 * when len > 0; *needed receives its full length in bytes (excluding the NUL), 0 when the
 * thread has no failure on record. Returns FFR_E_SHORTBUF when len <= *needed (buf may be
 * NULL with len 0 to ask for the length). The record is left as it was: ffr_errmsg and
 * ffr_oserror never record a failure of their own. */
int32_t ffr_errmsg(char *buf, size_t len, size_t *needed);

/* The operating-system error behind the calling thread's last failure: *os_errno receives
 * its errno (0 when that failure was not an operating-system error, or none is on record),
 * and the path it concerned is copied into path like ffr_errmsg copies the message (empty
 * when unknown). With these a caller can raise its language's own error for the errno
 * (e.g. EACCES, ENOTDIR) rather than a generic FFR_E_IO. */
int32_t ffr_oserror(int32_t *os_errno, char *path, size_t len, size_t *needed);

/* Number of reader and writer handles currently open (for leak checks). */
int32_t ffr_open_handles(uint64_t *count);

/* CRC-32C (Castagnoli) of size bytes at data, continuing crc (0 to start; the previous
 * result to checksum a stream in pieces), into *out. Not the checksum of FFRecord files
 * (CRC-32/IEEE): the one of formats converted from, e.g. TFRecord framing. Uses the CPU's
 * CRC instructions when it has them. */
int32_t ffr_crc32c(uint32_t crc, const void *data, uint64_t size, uint32_t *out);

/* The shuffle order of one epoch: out[k] = the index at position positions[k] of the
 * pseudo-random permutation of [0, n) keyed by seed and epoch (a pure function of the three,
 * the same in every release; see core.Permutation). A position outside [0, n) is
 * FFR_E_INDEX, an n above 2^63 FFR_E_INVALID. */
int32_t ffr_permute(uint64_t n, uint64_t seed, uint64_t epoch, const int64_t *positions,
                    uint64_t count, int64_t *out);

/* The files that make up the dataset directory dir, as ffr_reader_open reads it: its
 * entries named *.ffr that are neither hidden nor directories, in name order, copied into
 * buf one path a line, each ending in '\n' (nothing for a directory without any; a name
 * holding '\n' is FFR_E_INVALID). Buffer protocol as for ffr_errmsg. */
int32_t ffr_dataset_files(const char *dir, char *buf, size_t len, size_t *needed);

/* The objects directly under the s3:// prefix url that ffr_reader_open reads as a dataset
 * (named *.ffr, not hidden: the rule of ffr_dataset_files), as URLs in key order, one a
 * line, each ending in '\n' (nothing for a prefix without any). options: storage options
 * JSON (NULL: the defaults). Buffer protocol as for ffr_errmsg. */
int32_t ffr_dataset_urls(const char *url, const char *options, char *buf, size_t len,
                         size_t *needed);

/* The file name of part k of a dataset written as nparts parts: PART_00000.ffr, …, the
 * number widened past 100,000 parts so that name order stays part order. Buffer protocol
 * as for ffr_errmsg. */
int32_t ffr_part_name(uint64_t k, uint64_t nparts, char *buf, size_t len, size_t *needed);

/* ---- writer ------------------------------------------------------------------------- */

/* Starts writing a file of exactly n samples at path (UTF-8). Data goes to a temporary file
 * beside path; path itself appears only at a successful ffr_writer_close. n ==
 * UINT64_MAX means "count not known in advance" (samples are staged, the header is
 * written at close). */
int32_t ffr_writer_create(const char *path, uint64_t n, int32_t compression, int64_t *handle);

/* durable != 0 (the default): ffr_writer_close fsyncs the file and its directory. 0: it does
 * not (nor does the writer start writeback early), for scratch files a crash may lose: the
 * file still appears at path complete or not at all while the machine stays up. */
int32_t ffr_writer_set_durable(int64_t handle, int32_t durable);

/* Appends one sample of len bytes. len may be 0 (data may then be NULL). */
int32_t ffr_writer_write(int64_t handle, const void *data, uint64_t len);

/* Appends n samples stored back to back in data, sizes[k] bytes each (data may be NULL
 * when they add up to 0; sizes may be NULL when n is 0): one call for many small samples,
 * stored exactly as n calls of ffr_writer_write would store them, and as consecutive
 * samples: no sample written by another thread through the same handle lands between them.
 * What can be checked up front is checked before anything is written, and such a failure
 * writes none of the batch: a NULL array, sizes adding up to more than any buffer, a batch
 * larger than the room left below the n given at create (FFR_E_INVALID), a closed handle.
 * An I/O error while writing loses the file, as for ffr_writer_write. */
int32_t ffr_writer_write_batch(int64_t handle, const void *data, const uint64_t *sizes,
                               uint64_t n);

/* ffr_writer_write_batch for n samples each in its own memory: sample k is the sizes[k]
 * bytes at data[k] (which may be NULL when sizes[k] is 0). Large samples (64 KiB and more,
 * uncompressed) are written to the file from where they are, several in one system call,
 * with no copy; the call returns once they are in the page cache. */
int32_t ffr_writer_write_vectors(int64_t handle, const void *const *data,
                                 const uint64_t *sizes, uint64_t n);

/* Number of samples written so far. */
int32_t ffr_writer_count(int64_t handle, uint64_t *count);

/* Writes the header, fsyncs and renames the file into place; frees the handle whether it
 * succeeds or not. Fails with FFR_E_INVALID (and leaves nothing at path) when fewer than n
 * samples were written. Closing a closed writer returns FFR_OK and does nothing. */
int32_t ffr_writer_close(int64_t handle);

/* Discards everything written and frees the handle; nothing is left at path. Aborting a
 * closed writer (closed or aborted) returns FFR_OK and does nothing. */
int32_t ffr_writer_abort(int64_t handle);

/* ---- reader ------------------------------------------------------------------------- */

/* Opens npaths paths (UTF-8) as one dataset, in the order given. A path that is a
 * directory stands for its *.ffr files sorted by name. flags: FFR_CHECK_DATA | FFR_DIRECT |
 * FFR_NO_DESCRIPTORS. */
int32_t ffr_reader_open(const char *const *paths, uint64_t npaths, uint32_t flags,
                        int64_t *handle);

/* ffr_reader_open for a process handed the identities of files that another one vouches
 * for (ffr_reader_verified there: their metadata checked), such as a data loader worker:
 * with FFR_CHECK_DATA, a file whose identity (device, inode, size, modification and change
 * times) is still one of ids is not checked again; any change to a file gives it another
 * identity, and the full check. ids holds nids words, 5 per identity (FFR_E_INVALID when
 * nids is not a multiple of 5); it may be NULL when nids is 0. */
int32_t ffr_reader_open_verified(const char *const *paths, uint64_t npaths, uint32_t flags,
                                 const uint64_t *ids, uint64_t nids, int64_t *handle);

/* The identities of the files whose metadata this reader checked at open, or was handed and
 * found unchanged, 5 words each (device, inode, size, mtime and ctime in nanoseconds), into
 * ids[0 .. nids); *needed receives the number of words. A file changed just before it was
 * opened (within a tick of the file clock) is left out: a change right after could keep
 * its times. Returns FFR_E_SHORTBUF when nids < *needed (ids may be NULL with nids 0). */
int32_t ffr_reader_verified(int64_t handle, uint64_t *ids, uint64_t nids, uint64_t *needed);

/* ffr_reader_open with storage options: options is NULL (the defaults) or a JSON object
 * configuring access to paths that are URLs (s3://bucket/key, s3://bucket/prefix/,
 * http(s)://...; file:// names a local path): "endpoint_url", "region", "profile",
 * "anonymous", "virtual_hosted", "concurrency", "coalesce_gap" (bytes), "timeout"
 * (seconds per request), "retries", "cache_dir", "versions" (see ffr_reader_versions). Unset fields come from the environment (AWS_ENDPOINT_URL,
 * AWS_REGION, AWS_PROFILE, the AWS credentials and config files, FFRECORD_CACHE_DIR,
 * FFRECORD_REMOTE_CONCURRENCY). An unknown field is FFR_E_INVALID. A missing object is
 * FFR_E_NOTFOUND (errno ENOENT), a refused one FFR_E_IO with errno EACCES, a response
 * cut short again after a retry FFR_E_CORRUPT, an object replaced since it was opened (a
 * read is conditional on the ETag seen at open) FFR_E_IO with errno ESTALE. In an s3://
 * URL everything after the bucket's "/" is the key, verbatim (no query, fragment or
 * percent-decoding). */
int32_t ffr_reader_open_options(const char *const *paths, uint64_t npaths, uint32_t flags,
                                const char *options, int64_t *handle);

/* Total number of samples. */
int32_t ffr_reader_len(int64_t handle, uint64_t *n);

/* Number of file descriptors the reader holds open: one per local file that kept its own
 * (see FFR_NO_DESCRIPTORS), another per file read with FFR_DIRECT; remote files count none.
 * A process bounding its open descriptors counts these, not files. */
int32_t ffr_reader_descriptors(int64_t handle, uint64_t *count);

/* Number of files behind the reader, after directory expansion. */
int32_t ffr_reader_nfiles(int64_t handle, uint64_t *nfiles);

/* Copies the name of file i (as opened, after directory expansion) into buf, always
 * NUL-terminated; *needed receives the full length in bytes (excluding the NUL).
 * Returns FFR_E_SHORTBUF when len <= *needed (buf may be NULL with len 0 to ask for the
 * length), FFR_E_INDEX when i >= nfiles. */
int32_t ffr_reader_fname(int64_t handle, uint64_t i, char *buf, size_t len, size_t *needed);

/* Number of samples in each file, into counts[0 .. nfiles of the reader). The nfiles
 * argument is the capacity of counts: FFR_E_SHORTBUF when it is less than
 * ffr_reader_nfiles gives; entries beyond that are left alone. */
int32_t ffr_reader_file_counts(int64_t handle, uint64_t *counts, uint64_t nfiles);

/* The chunk rule (core/chunks.go): chunks are runs of consecutive samples of one file; a
 * new chunk starts when the next sample would push the chunk's stored bytes over
 * chunk_size (a larger sample is a chunk of its own). Fills bounds[0 .. capacity) with the
 * dataset-wide index of each chunk's first sample, then the number of samples; *needed is
 * how many values that is (FFR_E_SHORTBUF, bounds untouched, when capacity is smaller).
 * FFR_E_INVALID for chunk_size 0. */
int32_t ffr_reader_chunk_bounds(int64_t handle, uint64_t chunk_size, uint64_t *bounds,
                                uint64_t capacity, uint64_t *needed);

/* Into *bytes: how many bytes from the start of a remote file the request that reads its
 * header asks for, with a chunk cache of chunk_size (0: none); read_ahead non-zero for a
 * reader's first file, which reads its first chunk with its header. The chunks lying
 * wholly in those bytes are cached from them, with no GET of their own. */
int32_t ffr_first_request_bytes(uint64_t chunk_size, int32_t read_ahead, uint64_t *bytes);

/* Counters of the reader since it was opened, into stats[0 .. min(n, FFR_STAT_FIELDS)),
 * indexed by FFR_STAT_*: requests sent to object storage (retries included), body bytes
 * received, retries, chunk-cache hits, misses, evictions made, chunks read uncached for
 * want of room, chunks downloaded ahead (ffr_reader_prefetch), and the stored bytes of the
 * remote files' samples read (FFR_STAT_BYTES / FFR_STAT_DELIVERED: what reading over the
 * network costs, above 1 when bytes fetched are not read, below when a cache serves). */
#define FFR_STAT_REQUESTS   0
#define FFR_STAT_BYTES      1
#define FFR_STAT_RETRIES    2
#define FFR_STAT_HITS       3
#define FFR_STAT_MISSES     4
#define FFR_STAT_EVICTIONS  5
#define FFR_STAT_BYPASSED   6
#define FFR_STAT_PREFETCHED 7
#define FFR_STAT_DELIVERED  8
#define FFR_STAT_FIELDS     9
int32_t ffr_reader_stats(int64_t handle, int64_t *stats, uint64_t n);

/* Warnings raised at open (e.g. a legacy file whose metadata checksum is 0), one per line,
 * copied like ffr_reader_fname. Empty when there are none. */
int32_t ffr_reader_warnings(int64_t handle, char *buf, size_t len, size_t *needed);

/* The version of each remote file as the reader opened it, copied like ffr_reader_fname:
 * a JSON object {"URL": {"size": N, "etag": "..."}, ...} (files without an ETag left out;
 * "{}" for local files). Passed as the "versions" storage option to ffr_reader_open_options
 * in another process, it opens those objects with no request and pins them to the same
 * versions (a read of one replaced since fails with errno ESTALE). */
int32_t ffr_reader_versions(int64_t handle, char *buf, size_t len, size_t *needed);

/* sizes[k] = size in bytes of sample indices[k], as ffr_reader_read_batch returns it
 * (the original size for compressed samples). */
int32_t ffr_reader_sizes(int64_t handle, const uint64_t *indices, uint64_t n, uint64_t *sizes);

/* Reads samples indices[0..n) into dst, back to back in the order given (duplicates
 * allowed), and sets sizes[k] as ffr_reader_sizes does. When dst_len is smaller than the
 * total, returns FFR_E_SHORTBUF with sizes filled and nothing read (dst may be NULL with
 * dst_len 0). With FFR_CHECK_DATA, every sample's CRC is verified. One call releases the
 * caller for the whole batch: the library decides how many reads to keep in flight. */
int32_t ffr_reader_read_batch(int64_t handle, const uint64_t *indices, uint64_t n, void *dst,
                              uint64_t dst_len, uint64_t *sizes);

/* Sample index of each of the n readers handles[0..n), back to back into dst in that order,
 * sizes[k] set as ffr_reader_sizes does: one call for a datapoint whose fields are in
 * separate files. When dst_len is smaller than the total, returns FFR_E_SHORTBUF with every
 * size filled (dst's contents are then unspecified). */
int32_t ffr_readers_read_one(const int64_t *handles, uint64_t n, uint64_t index, void *dst,
                             uint64_t dst_len, uint64_t *sizes);

/* Sample indices[k] of reader handles[k], for each k < n, back to back into dst in that
 * order, sizes[k] set as ffr_reader_sizes does: one call for a batch gathered from many
 * readers (a mixture's members, a dataset's shards). Each run of equal handles is read as
 * one ffr_reader_read_batch would read it: order the pairs by handle to read each reader's
 * samples together. When dst_len is smaller than the total, returns FFR_E_SHORTBUF with
 * every size filled (dst's contents are then unspecified). */
int32_t ffr_readers_read_batch(const int64_t *handles, const uint64_t *indices, uint64_t n,
                               void *dst, uint64_t dst_len, uint64_t *sizes);

/* Starts bringing samples indices[0..n) into the page cache (remote files read through
 * the chunk cache: starts downloading their chunks, as many as the cache has room for)
 * and returns without waiting for them (a hint for a later ffr_reader_read_batch of them,
 * such as a loader worker's next batch); *queued receives the number of reads queued. Fails only with FFR_E_INDEX for an
 * index out of range or on a closed handle; queues nothing (0) for a reader opened with
 * FFR_DIRECT, for samples that a few probes find cached already, or while several earlier
 * prefetches of the reader still run. Closing the reader waits for running prefetches. */
int32_t ffr_reader_prefetch(int64_t handle, const uint64_t *indices, uint64_t n,
                            uint64_t *queued);

/* Describes file i of the reader (after directory expansion): fills
 * info[0 .. min(ninfo, FFR_INFO_FIELDS)), indexed by FFR_INFO_*. Entries beyond the fields
 * this version knows are left alone. The first question about a file (or verification of
 * it) checks its metadata, one pass over its header; later ones reuse the answer.
 * FFR_E_INDEX when i >= nfiles. */
int32_t ffr_reader_file_info(int64_t handle, uint64_t i, uint64_t *info, uint64_t ninfo);

/* The stamp of file i as the reader opened it, known without a read: stamp[0] its size,
 * stamp[1] the sample count its header stores (an extension record included), stamp[2] the
 * CRC-32 its header stores of its sample tables (unchecked; 0 for an old writer's file): what
 * ffr_describe_file gives of a file not open. Another file with the same stamp holds the same
 * tables, so the same samples as far as their CRC-32s tell: a copy of a reader in another
 * process compares stamps to tell the file it reopened from a replaced one, and a dataset's
 * manifest records them. FFR_E_INDEX when i >= nfiles. */
int32_t ffr_reader_file_stamp(int64_t handle, uint64_t i, uint64_t *stamp);

/* Copies the per-sample tables of file i as stored (the reference's get_offsets and
 * get_checksums): offsets[k] is where stored sample k begins and offsets[stored] is the file
 * size, so sample k spans offsets[k] to offsets[k+1]; checksums[k] is its stored CRC-32.
 * "stored" is FFR_INFO_STORED of ffr_reader_file_info (a compressed file's extension record
 * included). n is the capacity: offsets holds n+1 entries, checksums n; FFR_E_SHORTBUF
 * when n < stored (entries beyond stored are left alone). FFR_E_INDEX when i >= nfiles. */
int32_t ffr_reader_file_header(int64_t handle, uint64_t i, uint64_t *offsets,
                               uint32_t *checksums, uint64_t n);

/* Reads n byte ranges of samples into dst, back to back in the order given: triples[3k],
 * triples[3k+1], triples[3k+2] are the sample index, the offset of the first byte and the
 * length of range k, in the bytes ffr_reader_read_batch returns for that sample. Only the
 * bytes asked for are read from an uncompressed sample; a compressed sample is read and
 * decompressed whole. A range covering a whole sample is CRC-checked with FFR_CHECK_DATA;
 * a partial range of an uncompressed sample cannot be (the CRC covers the whole sample)
 * and is returned as stored. A range ending past the end of its sample, or an index past
 * the dataset, is FFR_E_INDEX (the message names both); dst_len smaller than the lengths
 * add up to is FFR_E_SHORTBUF. Nothing is read when the call fails that way. */
int32_t ffr_reader_read_ranges(int64_t handle, const uint64_t *triples, uint64_t n, void *dst,
                               uint64_t dst_len);

/* Gathers values of a column file (see core's format spec, "Column blocks"): the file holds
 * nvalues values of width bytes each, per_block of them to a sample (the last sample the
 * rest). Value indices[k] is copied to dst[k*width .. (k+1)*width) (duplicates and any order
 * allowed). Each block holding one of them is read once, its size checked against the
 * layout and, with FFR_CHECK_DATA, its CRC-32. A layout of a zero width or per_block, or
 * of blocks over 1 GiB, is FFR_E_INVALID; one whose block count is not the file's sample
 * count, or a block of another size, FFR_E_CORRUPT; a damaged block FFR_E_CHECKSUM, the
 * message naming the block and the values it holds ("column block 3: values 3072 to
 * 4095"). An index at or past nvalues is FFR_E_INDEX, dst_len < n*width FFR_E_SHORTBUF;
 * nothing is read then. */
int32_t ffr_reader_read_values(int64_t handle, uint64_t nvalues, uint64_t width, uint64_t per_block,
                               const uint64_t *indices, uint64_t n, void *dst, uint64_t dst_len);

/* Values [start, start+count) of a column file (layout, checks and errors as for
 * ffr_reader_read_values) into dst: the blocks the range covers whole are read straight
 * into dst by one batch read, the partial first and last ones through a scratch buffer. */
int32_t ffr_reader_read_value_range(int64_t handle, uint64_t nvalues, uint64_t width,
                                    uint64_t per_block, uint64_t start, uint64_t count, void *dst,
                                    uint64_t dst_len);

/* Reads samples [start, start+count) back to back into dst and sets offsets[0..count]
 * (count+1 entries): sample start+k is dst[offsets[k] .. offsets[k+1]) — the data and
 * offsets of an Arrow binary array. The samples of the run that lie in one uncompressed
 * local file are read by one system call and, with FFR_CHECK_DATA, each checked against its
 * CRC-32 (a damaged one is FFR_E_CHECKSUM naming its file, its index there and in the
 * dataset, as ffr_reader_read_batch reports it); compressed and remote files, and readers
 * opened with FFR_DIRECT, are read as ffr_reader_read_batch reads them. A run past the end
 * of the dataset is FFR_E_INDEX. When dst_len is smaller than the run's bytes, returns
 * FFR_E_SHORTBUF with offsets filled and nothing read (dst may be NULL with dst_len 0): the
 * first call of a caller that does not know the size. */
int32_t ffr_reader_read_span(int64_t handle, uint64_t start, uint64_t count, void *dst,
                             uint64_t dst_len, uint64_t *offsets);

/* Reads windows of an item stream, widened to int64, with one ranged read (as
 * ffr_reader_read_ranges): the stream is the items of samples 0..nsamples-1 concatenated
 * (the token ids of tokenized documents, say); sample k's items are little-endian unsigned
 * integers of item_size bytes (1, 2, 4 or 8) from byte data_offsets[k] of the sample, and
 * starts[k] (nsamples+1 entries, ascending) is where sample k begins in the stream. With
 * separator >= 0, the last position of each sample in the stream holds separator, after its
 * items (starts count it). Window j is stream positions [blocks[j]*stride,
 * blocks[j]*stride+width), written to dst[j*width .. (j+1)*width) (dst_len in bytes). A
 * window not wholly in the stream is FFR_E_INDEX naming the block ("block b out of range
 * for m blocks"); dst_len < n*width*8 is FFR_E_SHORTBUF; item_size, stride or width out of
 * bounds, or starts out of order, FFR_E_INVALID: dst is then left alone (a failed read may
 * leave it partly written). */
int32_t ffr_reader_read_windows(int64_t handle, const int64_t *starts, const uint64_t *data_offsets,
                                uint64_t nsamples, uint32_t item_size, int64_t separator,
                                const uint64_t *blocks, uint64_t n, uint64_t stride,
                                uint64_t width, int64_t *dst, uint64_t dst_len);

/* Checks, whatever the reader's flags, the samples in [start, start+count) in ascending
 * order (each one's place in its file, its CRC-32 and, when compressed, that it decodes to
 * its recorded size) and the metadata of every file the range touches (once per reader and
 * file). For the k-th bad sample found it writes its index to bad[k], the class of its
 * problem (FFR_E_CHECKSUM or FFR_E_CORRUPT) to reasons[k] and, when text is given, its
 * message (file, sample, detail) NUL-terminated after the k-1 before it in text. *nbad
 * receives how many were written.
 *
 * The check stops at a bad sample that finds no room (cap entries written already, or too
 * little of text left for its message and NUL), and *next receives where it stopped: that
 * sample's index, else start+count. A call from *next goes on without checking anything
 * twice, so any number of bad samples can be had a page at a time; with cap 0 the call
 * stops at the first bad sample. text may be NULL with text_len 0 to leave messages out;
 * bad and reasons may be NULL only with cap 0. Returns FFR_E_SHORTBUF (nothing written,
 * *next the sample's index) when the first bad sample's message alone does not fit text.
 *
 * Damaged metadata of a file is FFR_E_CHECKSUM or FFR_E_CORRUPT, returned after the page is
 * filled (*nbad and *next too), and again by each later page that covers that file. A
 * range beyond the dataset (start + count > the number of samples, computed without
 * overflow) is FFR_E_INDEX; a failure to read at all is an error status. */
int32_t ffr_reader_verify(int64_t handle, uint64_t start, uint64_t count, uint64_t *bad,
                          int32_t *reasons, uint64_t cap, char *text, size_t text_len,
                          uint64_t *nbad, uint64_t *next);

/* Closes the reader. Closing a closed reader returns FFR_OK and does nothing. */
int32_t ffr_reader_close(int64_t handle);

/* ---- object storage ----------------------------------------------------------------- */

/* Uploads the local file at path to url (s3://bucket/key), in parallel parts when large.
 * The object appears only once the upload completes; a failed upload is aborted and
 * leaves no object. options: as for ffr_reader_open_options. */
int32_t ffr_upload(const char *path, const char *url, const char *options);

/* Copies the whole object at url (a small text document, at most 16 MiB, such as a
 * dataset's spec.json) into buf, NUL-terminated; *needed receives its length. Returns
 * FFR_E_SHORTBUF when len <= *needed (buf may be NULL with len 0 to ask for the length). */
int32_t ffr_fetch_text(const char *url, const char *options, char *buf, size_t len,
                       size_t *needed);

/* The copy of the document at url that the last ffr_fetch_text with the same cache
 * directory (options' cache_dir, else FFRECORD_CACHE_DIR) kept, copied as ffr_fetch_text
 * copies, without a request; FFR_E_NOTFOUND when none was kept. The object may have
 * changed since: a guess, to start work that a fetch then confirms. */
int32_t ffr_fetched_text(const char *url, const char *options, char *buf, size_t len,
                         size_t *needed);

/* Lists what lies directly under the prefix url (s3://bucket/prefix/) into buf,
 * NUL-terminated: one name a line, each ending in '\n', sorted; objects by their name,
 * "sub-directories" (longer keys' next segment) by their name followed by '/'. A missing
 * prefix lists nothing. Buffer protocol as for ffr_fetch_text. */
int32_t ffr_list(const char *url, const char *options, char *buf, size_t len, size_t *needed);

/* Lists the objects directly under the prefix url (s3://bucket/prefix/; not its
 * "sub-directories") into buf, NUL-terminated: one a line, "name\tsize\tetag\n", sorted by
 * name, the ETag without its quotes (empty when the store gives none). Given to
 * ffr_reader_open_options as "versions", a size and ETag open that object with no request.
 * *requests receives the requests the listing took (one per page of 1,000 objects), also
 * when the call fails or the buffer is short: a call again with a larger buffer lists
 * again. A name or ETag holding a tab or newline is FFR_E_INVALID. Buffer protocol as for
 * ffr_fetch_text. */
int32_t ffr_list_objects(const char *url, const char *options, char *buf, size_t len,
                         size_t *needed, uint64_t *requests);

/* The stamp of the FFRecord file at path (a local path or a URL), as ffr_reader_file_stamp
 * gives it of an open file and a dataset's manifest records it: stamp[0] its size, stamp[1]
 * the sample count its header stores (an extension record included), stamp[2] its stored
 * metadata checksum (0: an old writer's); its ETag (without quotes; empty for a local file, or when the store gives none) copied into
 * etag as ffr_fetch_text copies. Read from the file's first 12 bytes: one request when remote
 * (a short buffer asks again). A file shorter than a header is FFR_E_CORRUPT; one that is not
 * a regular file FFR_E_INVALID. */
int32_t ffr_describe_file(const char *path, const char *options, uint64_t *stamp, char *etag,
                          size_t len, size_t *needed);

/* Creates the object at url (s3://bucket/key) holding size bytes at data, only if no object
 * has that key (a conditional PUT, If-None-Match: *): one there already is FFR_E_IO with
 * ffr_oserror EEXIST. A PUT sent again after its answer was lost finds its own object and
 * succeeds when the object holds these bytes, so data should say who wrote it. */
int32_t ffr_put_new(const char *url, const char *options, const void *data, uint64_t size);

/* Deletes the object at url (s3://bucket/key); a missing object is FFR_OK. */
int32_t ffr_remove(const char *url, const char *options);

/* Deletes the object at url (s3://bucket/key) only while it holds the size bytes at data
 * (what this caller put there with ffr_put_new: a writer's claim): it reads the object,
 * then deletes it on condition of the ETag read (If-Match), so that an object another
 * writer put in its place meanwhile stays. An object holding anything else is left, and is
 * FFR_E_IO with ffr_oserror EEXIST; a missing object is FFR_OK. A store that ignores
 * If-Match on DELETE deletes unconditionally: the read narrows the race to the time
 * between the read and the delete. */
int32_t ffr_remove_if_holds(const char *url, const char *options, const void *data, uint64_t size);

/* FFR_OK when url (s3://, http(s)://) is well formed as every call above reads it, else
 * FFR_E_INVALID saying why; no request is made. */
int32_t ffr_check_url(const char *url);

/* What path names, as every call taking a path reads it (no request is made): *kind
 * receives FFR_PATH_S3 for an s3:// URL, FFR_PATH_HTTP for an http:// or https:// one (the
 * URL copied to buf unchanged and unchecked: ffr_check_url checks it), and FFR_PATH_LOCAL
 * for anything else, buf then receiving the path to open: a file:// URL's local path
 * (FFR_E_INVALID when it names another host), any other path unchanged. Buffer protocol as
 * for ffr_fetch_text. */
#define FFR_PATH_LOCAL 0
#define FFR_PATH_S3    1 /* read and written */
#define FFR_PATH_HTTP  2 /* read only        */
int32_t ffr_locate(const char *path, uint32_t *kind, char *buf, size_t len, size_t *needed);

/* FFR_OK when options (a JSON object, as ffr_reader_open_options takes it) holds only
 * storage options, each value of its option's JSON type; else FFR_E_INVALID naming the
 * option, never quoting a value. "env" is not an option here: it is how a host passes its
 * environment, which this call does not read. */
int32_t ffr_check_options(const char *options);

#ifdef __cplusplus
}
#endif

#endif /* FFRECORD_H */
