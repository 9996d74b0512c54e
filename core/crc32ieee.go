package core

import "github.com/klauspost/crc32"

// checksumIEEE is the CRC-32/IEEE of p: the checksum of every sample and of the header
// (see doc.go).
func checksumIEEE(p []byte) uint32 {
	return updateIEEE(0, p)
}

// updateIEEE returns the CRC-32/IEEE of the bytes whose checksum is crc followed by p. Where
// the CPU multiplies carry-less on 256-bit registers (VPCLMULQDQ with AVX2), buffers of
// foldMinBytes or more are folded 128 bytes at a time (foldIEEE), about twice the speed of
// klauspost/crc32's 128-bit folding for the 1 KiB samples of a batch; the rest goes to
// klauspost/crc32.
func updateIEEE(crc uint32, p []byte) uint32 {
	if hasWideFold && len(p) >= foldMinBytes {
		n := len(p) &^ 15
		crc = ^foldIEEE(^crc, p[:n])
		p = p[n:]
	}
	return crc32.Update(crc, crc32.IEEETable, p)
}

// foldMinBytes is the least foldIEEE takes: the 128 bytes its four registers start from,
// and a first block to fold into them.
const foldMinBytes = 256
