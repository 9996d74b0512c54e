package core

import (
	"sync"

	"github.com/klauspost/crc32"
)

// castagnoli is the CRC-32C table; klauspost/crc32 computes with the SSE4.2 / ARMv8 CRC
// instructions when the CPU has them. It is made at first use: making it fills the tables
// of those instructions, ~4 ms that every process loading the library would otherwise pay
// before its first read, CRC-32C or not.
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// UpdateCRC32C returns the CRC-32C (Castagnoli) of the bytes whose CRC-32C is crc followed
// by data; crc = 0 starts a new checksum. FFRecord files use CRC-32/IEEE (see doc.go);
// CRC-32C is what other record formats frame with (TFRecord), so that their converters
// share this one hardware-backed implementation.
func UpdateCRC32C(crc uint32, data []byte) uint32 {
	return crc32.Update(crc, castagnoli(), data)
}
