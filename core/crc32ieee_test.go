package core

import (
	stdcrc "hash/crc32"
	"math/rand/v2"
	"testing"
)

// updateIEEE agrees with the standard library at every length around the folding's edges
// (its 256-byte minimum, 128-byte steps and 16-byte tail), from any offset and starting
// checksum.
func TestUpdateIEEEMatchesStandardLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 1))
	buf := make([]byte, 5000)
	fillRandom(rng, buf)
	for n := 0; n <= 1200; n++ {
		off := rng.IntN(64)
		p := buf[off : off+n]
		if got, want := checksumIEEE(p), stdcrc.ChecksumIEEE(p); got != want {
			t.Fatalf("checksumIEEE of %d bytes: 0x%08x, want 0x%08x", n, got, want)
		}
		start := rng.Uint32()
		if got, want := updateIEEE(start, p), stdcrc.Update(start, stdcrc.IEEETable, p); got != want {
			t.Fatalf("updateIEEE(0x%08x) of %d bytes: 0x%08x, want 0x%08x", start, n, got, want)
		}
	}
	for _, n := range []int{4096, 4097, 4999} {
		if got, want := checksumIEEE(buf[:n]), stdcrc.ChecksumIEEE(buf[:n]); got != want {
			t.Fatalf("checksumIEEE of %d bytes: 0x%08x, want 0x%08x", n, got, want)
		}
	}
}
