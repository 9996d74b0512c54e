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
// klauspost/crc32, but for buffers under shortBytes (updateShortIEEE).
func updateIEEE(crc uint32, p []byte) uint32 {
	if len(p) < shortBytes {
		return updateShortIEEE(crc, p)
	}
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

// shortBytes bounds the buffers whose CRC updateShortIEEE computes: from 64 bytes
// klauspost/crc32 folds with carry-less multiplication, faster than tables.
const shortBytes = 64

// shortTables are the tables of slicing-by-8: shortTables[j][b] is the CRC-32/IEEE state
// after byte b followed by j zero bytes.
var shortTables = func() *[8][256]uint32 {
	t := new([8][256]uint32)
	t[0] = *crc32.MakeTable(crc32.IEEE)
	for b := range 256 {
		for j := 1; j < 8; j++ {
			t[j][b] = t[0][t[j-1][b]&0xFF] ^ t[j-1][b]>>8
		}
	}
	return t
}()

// updateShortIEEE is updateIEEE of a short buffer, by slicing-by-8 (eight table lookups per
// eight bytes). klauspost/crc32 computes short buffers the same way, but behind a table
// check, a sync.Once and two calls, which cost more than the lookups for the short values
// of a span (measured here for 32 bytes: 15 ns, against 24 through klauspost/crc32).
func updateShortIEEE(crc uint32, p []byte) uint32 {
	t := shortTables
	crc = ^crc
	for ; len(p) >= 8; p = p[8:] {
		crc ^= le.Uint32(p)
		crc = t[7][crc&0xFF] ^ t[6][crc>>8&0xFF] ^ t[5][crc>>16&0xFF] ^ t[4][crc>>24] ^
			t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]]
	}
	for _, b := range p {
		crc = t[0][byte(crc)^b] ^ crc>>8
	}
	return ^crc
}
