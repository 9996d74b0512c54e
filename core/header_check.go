package core

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/klauspost/crc32"
)

// parallelHeaderBytes is the header size from which checking it is split across cores: a
// 5-million-sample header is 60 MB, whose check is what opening such a file costs.
const parallelHeaderBytes = 8 << 20

// noCut is headerPart.cut when no offset of the part lies past the end of the file.
const noCut = math.MaxUint64

// headerPart is what checking one stretch of the header found.
type headerPart struct {
	sum  uint32 // CRC-32 of the stretch
	size uint64 // its length, to combine the CRCs of consecutive stretches
	cut  uint64 // the first offset past the end of the file, or noCut
	err  error  // the first misplaced offset, or a fault
}

// checkHeader validates the header in one pass over it: the metadata checksum (unless the
// stored one is 0, from old writers) and every offset, the first at the end of the header
// and none decreasing. A large header is cut into one stretch per core, each checksummed
// and its offsets checked by its own goroutine; the stretches' CRCs are then combined.
// Each page is touched once and released behind the check, so that a 60 MB header is
// never resident in this process. Offsets past the end of the file mean the file was cut
// short inside the data: the samples before the cut stay readable, so that is a warning
// here and an error for each missing sample when it is read. A bad checksum is reported
// before a bad offset, as the checksum covers the offsets.
func (f *dataFile) checkHeader(warnings *[]string) error {
	from, to := uint64(metaChecksumSize), f.header
	parts := 1
	if to-from >= parallelHeaderBytes {
		parts = runtime.GOMAXPROCS(0)
	}
	results := make([]headerPart, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := from+(to-from)*uint64(p)/uint64(parts), from+(to-from)*uint64(p+1)/uint64(parts)
		check := func() {
			where := func() (string, int64) { return f.path, -1 }
			var part headerPart
			if err := withFaultGuard(where, func() error { part = f.checkHeaderPart(lo, hi); return nil }); err != nil {
				part.err = err
			}
			results[p] = part
		}
		if p == parts-1 {
			check()
		} else {
			wg.Go(check)
		}
	}
	wg.Wait()
	var sum uint32
	var err error
	cut := uint64(noCut)
	for _, part := range results {
		sum = crc32Combine(sum, part.sum, part.size)
		if err == nil {
			err = part.err
		}
		cut = min(cut, part.cut)
	}
	if stored := le.Uint32(f.data); stored != 0 && sum != stored {
		return errorf(f.path, -1, ErrChecksum, "metadata: stored 0x%08x, computed 0x%08x", stored, sum)
	}
	if err != nil {
		return err
	}
	if cut != noCut {
		*warnings = append(*warnings, fmt.Sprintf(
			"%s: file is cut short (%d bytes): samples from %d on are missing", f.path, f.size, max(cut, 1)-1))
	}
	return nil
}

// checkHeaderPart checksums data[lo:hi] and checks the offsets that start in it, chunk by
// chunk, releasing each chunk's pages behind it.
func (f *dataFile) checkHeaderPart(lo, hi uint64) headerPart {
	part := headerPart{size: hi - lo, cut: noCut}
	checksummed := le.Uint32(f.data) != 0
	next := f.offsetFrom(lo)
	for at := lo; at < hi; {
		end := min(hi, at+validationChunk)
		if checksummed {
			part.sum = updateIEEE(part.sum, f.data[at:end])
		}
		stop := f.offsetFrom(end)
		if part.err == nil {
			part.err = f.checkOffsetRange(next, stop, &part.cut)
		}
		next = stop
		f.release(at, end)
		at = end
	}
	return part
}

// offsetFrom is the first sample whose offset starts at or after file position pos.
func (f *dataFile) offsetFrom(pos uint64) uint64 {
	base := offsetsAt(f.stored)
	if pos <= base {
		return 0
	}
	return min(f.stored, (pos-base+offsetSize-1)/offsetSize)
}

// checkOffsetRange checks the offsets of samples [i, stop) against the one before each,
// noting in *cut the first one past the end of the file.
func (f *dataFile) checkOffsetRange(i, stop uint64, cut *uint64) error {
	prev := f.header
	if i > 0 {
		prev = le.Uint64(f.data[offsetPos(f.stored, i-1):])
	}
	for ; i < stop; i++ {
		off := le.Uint64(f.data[offsetPos(f.stored, i):])
		switch {
		case i == 0 && off != f.header:
			return errorf(f.path, 0, ErrCorrupt, "offset %d is not the end of the header (%d)", off, f.header)
		case off < prev:
			return errorf(f.path, int64(i), ErrCorrupt, "offset %d is before the previous one (%d)", off, prev)
		case off > f.size && *cut == noCut:
			*cut = i
		}
		prev = off
	}
	return nil
}

// crc32Combine is the CRC-32 (IEEE) of A followed by B, given crcA, crcB and B's length:
// crcA advanced over len(B) zero bytes (multiplied by x^(8·len(B)) modulo the
// polynomial), then added to crcB.
func crc32Combine(crcA, crcB uint32, lenB uint64) uint32 {
	if lenB == 0 {
		return crcA
	}
	// x^(8·lenB) is the product of x^(2^k) over the bits k of 8·lenB.
	power := uint32(1 << 31) // x^0, in the reflected bit order
	for k, n := 3, lenB; n != 0; k, n = k+1, n>>1 {
		if n&1 != 0 {
			power = multModP(crc32PowersOfX[k%len(crc32PowersOfX)], power)
		}
	}
	return multModP(power, crcA) ^ crcB
}

// crc32PowersOfX[k] is x^(2^k) modulo the IEEE polynomial, in the reflected bit order.
// x^(2^32) is x again modulo this polynomial, so 32 powers serve every length.
var crc32PowersOfX = func() (t [32]uint32) {
	t[0] = 1 << 30 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = multModP(t[k-1], t[k-1])
	}
	return t
}()

// multModP multiplies two polynomials modulo the IEEE CRC-32 polynomial, reflected.
func multModP(a, b uint32) uint32 {
	var product uint32
	for m := uint32(1 << 31); m != 0; m >>= 1 {
		if a&m != 0 {
			product ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ crc32.IEEE
		} else {
			b >>= 1
		}
	}
	return product
}
