package core

import (
	"encoding/binary"
	"math"
)

// The base format (see the package documentation). Changing any of these breaks
// compatibility with the reference implementation.
const (
	metaChecksumSize = 4                            // u32 CRC-32 of the metadata
	countSize        = 8                            // u64 N
	fixedHeaderSize  = metaChecksumSize + countSize // 12: bytes before the per-sample tables
	checksumSize     = 4                            // u32 per sample
	offsetSize       = 8                            // u64 per sample
	perSampleHeader  = checksumSize + offsetSize    // 12 header bytes per sample
	maxSamples       = (math.MaxUint64 - fixedHeaderSize) / perSampleHeader
)

var le = binary.LittleEndian

// headerSize is the size of the header of a file of n samples, which is also the file
// offset of its first sample. ok is false when n is so large the size overflows.
func headerSize(n uint64) (size uint64, ok bool) {
	if n > maxSamples {
		return 0, false
	}
	return fixedHeaderSize + perSampleHeader*n, true
}

// checksumsAt and offsetsAt are the file offsets of the two per-sample tables.
func checksumsAt() uint64         { return fixedHeaderSize }
func offsetsAt(n uint64) uint64   { return fixedHeaderSize + checksumSize*n }
func checksumPos(i uint64) uint64 { return checksumsAt() + checksumSize*i }
func offsetPos(n, i uint64) uint64 {
	return offsetsAt(n) + offsetSize*i
}
