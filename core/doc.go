// Package core reads and writes FFRecord files: a fixed header that indexes a
// sequence of opaque samples, built for random access from many processes.
//
// # Wire format
//
// Every integer is little-endian. A file holding N samples is
//
//	+----------------+---------+--------------------+------------------+-------------+
//	| meta checksum  |    N    | sample checksums   | sample offsets   | sample data |
//	| u32            | u64     | N × u32            | N × u64          | ...         |
//	+----------------+---------+--------------------+------------------+-------------+
//	0                4         12                   12+4N              12+12N
//
// where:
//   - meta checksum is the CRC-32/IEEE (zlib's crc32) of bytes 4 … 12+12N, that is of
//     N, the sample checksums and the sample offsets, in that order. A stored value of 0
//     marks a file from an old writer: such files are read without metadata validation.
//   - sample checksum i is the CRC-32/IEEE of the bytes of sample i as stored.
//   - sample offset i is the absolute file offset of sample i. Offset 0 equals the header
//     size 12+12N; offsets never decrease; sample i ends where sample i+1 starts and the
//     last sample ends at end of file. Empty samples are allowed.
//
// # Compressed files: the extension record
//
// A file written with CompressLZ4 or CompressZstd is still a valid file of the base
// format above, so the reference implementation opens it and validates its header and
// every checksum (checksums cover the bytes as stored). What it adds lives in the data:
// sample i is stored either raw, or as one LZ4 block (github.com/pierrec/lz4/v4 block
// format, no frame), or as one Zstandard frame (RFC 8878, written by
// github.com/klauspost/compress/zstd without the optional frame checksum: the sample
// CRC-32 covers the stored bytes), and one more sample, the extension record, follows the
// M user samples (N = M+1):
//
//	offset      size   field
//	0           8      magic "\x89FFRext\x1a"
//	8           4      version, u32 = 1
//	12          4      reserved, u32 = 0
//	16          8      M, u64: the number of user samples, N − 1
//	24          8·M    original size of each sample, u64
//	24+8M       M      compression of each sample, u8: 0 raw, 1 LZ4 block, 2 Zstandard frame
//	24+9M       4      CRC-32/IEEE of bytes 0 … 24+9M of the record
//
// A reader treats the last sample as an extension record when it starts with the magic,
// its length is exactly 28+9M, M = N−1, and its own CRC matches; it then shows M samples
// and returns their original bytes. A last sample that starts with the magic and has the
// right length but a wrong CRC (or an unknown version) is a damaged record (ErrChecksum,
// ErrCorrupt); any other last sample is ordinary user data. A raw sample's stored size
// must equal its original size. A Zstandard frame that declares a content size must declare
// the original size. Samples that the compression does not shrink, empty samples and
// samples over 256 MiB are stored raw, so one file may mix raw samples with samples of its
// compression; a writer uses one compression per file. Files written without compression
// never carry the record and are byte for byte what the reference writes. Compression 2
// came after version 1 of the record was defined: a reader that predates it reports such
// samples as corrupt (unknown compression) rather than misreading them.
//
// # Ranged reads and what they check
//
// Reader.ReadRanges reads byte ranges (index, offset, length) of samples, counted in the
// bytes ReadBatch returns. From a raw sample only the bytes of the range are read. The
// sample CRC-32 covers the whole stored sample, so it is verified (with CheckData) only for
// a range that covers the whole sample; a partial range of a raw sample is returned as
// stored, unverified. A range of a compressed sample is served by reading, verifying and
// decoding the whole stored sample, then copying the range out: correct, but with no
// saving in bytes read. A layer that needs verified partial reads keeps its own checksums
// at a finer grain inside its samples: the structured datasets of the Python package
// (ffrecord.dataset) store, in each sample of a sequence field, an element table with a
// CRC-32 per element, which the structured reader checks for every element it reads. Their
// layout (one base-format file per field, spec.json, the element table, and the versioned
// manifest listing a dataset's shards with each field file's size, header digest and ETag,
// itself a base-format file) is specified in docs/structured-datasets.md.
//
// # Spans
//
// Reader.ReadSpan reads a run of samples [start, start+count) back to back into the
// caller's buffer, with each one's start in an offsets array of count+1 entries: the data
// and offsets of an Arrow binary array. The samples of a file without an extension record
// are stored back to back, so the run's part in such a file is located by the header's
// offset table alone (each offset checked as a batch checks it) and read by one system
// call; with CheckData each sample is then checked against its CRC-32, an error naming it
// as a batch's does. Compressed and remote files, and a reader in Direct mode, are read
// sample by sample as by ReadBatch.
//
// # Column blocks
//
// A column file stores V values of W bytes each (a fixed-size type: an int32, a
// float32[768] embedding) in plain samples of the base format, P values to a sample, in
// value order: sample b, a block, holds values b·P … min(b·P+P, V)−1 back to back, so
// every block is P·W bytes but the last, which holds the rest; the file has ⌈V/P⌉ samples
// (none when V = 0). A block has no header of its own: the layout (V, W, P) is kept by
// whoever knows the file as a column (a structured dataset keeps it in its spec.json, see
// docs/structured-datasets.md), and the file stays one any reader of the base format opens
// and checks. A block may be compressed like any sample (the extension record above); W
// counts its bytes as decoded. A value costs its own W bytes, a block one CRC-32 and 12
// bytes of header.
//
// Reader.ReadValues gathers values by index: each block holding one is read once,
// compared with the size the layout gives it (another size is ErrCorrupt) and checked
// whole against its CRC-32 (with CheckData), and the values are copied out of it;
// Reader.ReadValueRange reads a run of values, the blocks it covers whole straight into
// the caller's buffer. A random read of one value reads its whole block: P·W is a few KiB,
// small enough for random batches and large enough that a scan is a few large reads. An
// error about a block names the values it holds ("column block 3: values 3072 to 4095").
//
// # Reading: the format here, the I/O in package engine
//
// This package owns everything about the format: opening and validating headers,
// planning a batch (which file, which bytes, where each sample lands), checking CRCs,
// decoding, and errors in the format's terms (ErrCorrupt, ErrChecksum, ...). Where the
// bytes come from is not its concern: a batch found in the page cache is copied from a
// read-only mapping of each file, and a cold batch, or every batch with
// ReaderOptions.Direct, is handed as a list of (descriptor, offset, buffer) requests to
// the internal package engine, which reads them with many in flight (io_uring, Linux AIO
// or a pread pool, the first the kernel allows, or the one $FFRECORD_ENGINE names;
// O_DIRECT alignment and bounce buffers included). The engine reports a file that ended
// before a request was filled as io.ErrUnexpectedEOF, which this package returns as
// ErrCorrupt.
//
// # Writing
//
// A Writer streams samples to a temporary file beside the final path, named
// ".<name>.tmp-<random>" (never matching *.ffr, hidden from directory datasets), created
// with mode 0644 less the umask. Close writes the header, fsyncs the file, renames it over
// the final path and fsyncs the directory, so a crash or kill never leaves a partial file
// at the path. With UnknownCount the header size is not known while samples arrive. A
// first bulk write is placed in the file as if it were the last; smaller writes are kept in
// memory, within a bound for the whole process, and written behind the header at Close.
// Data placed for another count than the file ends with is copied behind the header into a
// second temporary file at Close (copy_file_range, in the kernel), which costs one more
// write of all of it and, for the length of Close, disk space for two copies.
//
// The constants in format.go are the format: changing any of them makes files that the
// reference implementation (HFAiLab ffrecord) and every earlier release cannot read, and
// makes this package unable to read theirs.
package core
