package core

import (
	stdcrc "hash/crc32"
	"math/rand/v2"
	"testing"
)

// updateIEEE agrees with the standard library at every length around the folding's edges
// (its 256-byte minimum, 128-byte steps and 16-byte tail), at lengths up to 1 MiB, from any
// offset and starting checksum: with the 256-bit folding where the CPU has it, and without.
func TestUpdateIEEEMatchesStandardLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 1))
	buf := make([]byte, 1<<20+64)
	fillRandom(rng, buf)
	lengths := make([]int, 0, 1300)
	for n := 0; n <= 1200; n++ {
		lengths = append(lengths, n)
	}
	for range 100 {
		lengths = append(lengths, rng.IntN(1<<20))
	}
	lengths = append(lengths, 4096, 4097, 1<<20)
	for _, wide := range []bool{true, false} {
		if wide && !hasWideFold {
			continue // this CPU folds with klauspost/crc32 alone, checked below
		}
		defer func(was bool) { hasWideFold = was }(hasWideFold)
		hasWideFold = wide
		for _, n := range lengths {
			off := rng.IntN(64)
			p := buf[off : off+n]
			if got, want := checksumIEEE(p), stdcrc.ChecksumIEEE(p); got != want {
				t.Fatalf("wide=%v: checksumIEEE of %d bytes at offset %d: 0x%08x, want 0x%08x", wide, n, off, got, want)
			}
			start := rng.Uint32()
			if got, want := updateIEEE(start, p), stdcrc.Update(start, stdcrc.IEEETable, p); got != want {
				t.Fatalf("wide=%v: updateIEEE(0x%08x) of %d bytes: 0x%08x, want 0x%08x", wide, start, n, got, want)
			}
		}
	}
}

// The checksum of every sample, header and written file goes through updateIEEE: on any
// bytes, from any start, it is the standard library's CRC-32/IEEE, and never panics.
func FuzzUpdateIEEE(f *testing.F) {
	f.Add(uint32(0), []byte{})
	f.Add(uint32(0xffffffff), make([]byte, 256))
	f.Add(uint32(7), make([]byte, 1000))
	f.Fuzz(func(t *testing.T, start uint32, p []byte) {
		if got, want := updateIEEE(start, p), stdcrc.Update(start, stdcrc.IEEETable, p); got != want {
			t.Fatalf("updateIEEE(0x%08x) of %d bytes: 0x%08x, want 0x%08x", start, len(p), got, want)
		}
	})
}
