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
//   - meta checksum is the CRC-32/IEEE (zlib's crc32) of bytes 4 … 12+12N, that is of
//     N, the sample checksums and the sample offsets, in that order. A stored value of 0
//     marks a file from an old writer: such files are read without metadata validation.
//   - sample checksum i is the CRC-32/IEEE of the bytes of sample i as stored.
//   - sample offset i is the absolute file offset of sample i. Offset 0 equals the header
//     size 12+12N; offsets never decrease; sample i ends where sample i+1 starts and the
//     last sample ends at end of file. Empty samples are allowed.
//
// The constants in format.go are the format: changing any of them makes files that the
// reference implementation (HFAiLab ffrecord) and every earlier release cannot read, and
// makes this package unable to read theirs.
package core
