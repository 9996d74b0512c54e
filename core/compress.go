package core

import (
	"bytes"
	"fmt"
	"math"

	"github.com/pierrec/lz4/v4"
)

// Compression selects how a Writer stores samples.
type Compression int

const (
	// CompressNone stores samples as given: the file is exactly what the reference writes.
	CompressNone Compression = 0
	// CompressLZ4 stores each sample as an LZ4 block (raw when that does not make it
	// smaller) and appends the extension record described in the package documentation.
	CompressLZ4 Compression = 1
	// CompressZstd is CompressLZ4 with Zstandard frames instead of LZ4 blocks: smaller
	// files, slower to write, about as fast to read.
	CompressZstd Compression = 2
)

func (c Compression) String() string {
	switch c {
	case CompressNone:
		return "none"
	case CompressLZ4:
		return "lz4"
	case CompressZstd:
		return "zstd"
	}
	return fmt.Sprintf("Compression(%d)", int(c))
}

// Per-sample compression bytes of the extension record.
const (
	compressionRaw  byte = 0
	compressionLZ4  byte = 1
	compressionZstd byte = 2
)

// The extension record (see doc.go).
const (
	extMagic        = "\x89FFRext\x1a"
	extVersion      = 1
	extFixedSize    = 8 + 4 + 4 + 8 // magic, version, reserved, count
	extTrailerSize  = 4             // CRC-32 of everything before it
	extPerSample    = 8 + 1         // original size, compression
	extSizesAt      = extFixedSize
	maxExtSamples   = (math.MaxUint64 - extFixedSize - extTrailerSize) / extPerSample
	maxPackedSample = 256 << 20 // larger samples are stored raw: LZ4 blocks stop near 2 GiB
	extVersionField = 8
	extCountField   = 16
)

// extension is a parsed extension record, read in place from the file mapping.
type extension struct {
	count        uint64 // user samples: N − 1
	sizes        []byte // count × u64 original sizes
	compressions []byte // count × u8
}

func (e *extension) originalSize(i uint64) uint64    { return le.Uint64(e.sizes[8*i:]) }
func (e *extension) sampleCompression(i uint64) byte { return e.compressions[i] }

// compression is how the file's samples were written: Zstandard when any sample is a
// Zstandard frame, else LZ4 (also for a file in which no sample shrank, whose writer's
// choice the record does not keep).
func (e *extension) compression() Compression {
	if bytes.IndexByte(e.compressions, compressionZstd) >= 0 {
		return CompressZstd
	}
	return CompressLZ4
}

func extRecordSize(count uint64) (uint64, bool) {
	if count > maxExtSamples {
		return 0, false
	}
	return extFixedSize + extPerSample*count + extTrailerSize, true
}

// findExtension recognises an extension record in the file's last sample. A last sample
// that does not start with the magic, or whose length does not fit a record for N − 1
// samples, is an ordinary sample; one that does but whose own checksum or version is
// wrong is a damaged record.
func (f *dataFile) findExtension() (*extension, error) {
	if f.stored == 0 {
		return nil, nil
	}
	last := f.stored - 1
	off, end, err := f.span(last)
	if err != nil {
		return nil, nil //nolint:nilerr // a bad span is reported when the sample is read
	}
	rec := f.data[off:end]
	if len(rec) < extFixedSize+extTrailerSize || !bytes.HasPrefix(rec, []byte(extMagic)) {
		return nil, nil
	}
	count := le.Uint64(rec[extCountField:])
	want, ok := extRecordSize(count)
	if !ok || count != last || want != uint64(len(rec)) {
		return nil, nil
	}
	body := uint64(len(rec)) - extTrailerSize
	stored := le.Uint32(rec[body:])
	if got := f.checksumRange(off, off+body); got != stored {
		return nil, errorf(f.path, int64(last), ErrChecksum,
			"extension record: stored 0x%08x, computed 0x%08x", stored, got)
	}
	if v := le.Uint32(rec[extVersionField:]); v != extVersion {
		return nil, errorf(f.path, int64(last), ErrCorrupt,
			"extension record version %d is not supported (this library reads %d)", v, extVersion)
	}
	sizesEnd := extSizesAt + 8*count
	return &extension{count: count, sizes: rec[extSizesAt:sizesEnd], compressions: rec[sizesEnd:body]}, nil
}

// compressor turns samples into their stored form for a Writer.
type compressor struct {
	compression  byte // what samples are compressed with: compressionLZ4 or compressionZstd
	lz4          lz4.Compressor
	scratch      []byte
	sizes        []uint64 // original size of every sample written
	compressions []byte
}

// keptScratch bounds the compression buffer kept between samples, so that one huge
// sample does not pin hundreds of MiB for the rest of the file.
const keptScratch = 16 << 20

// store returns the bytes to write for p; they stay valid until the next call.
func (c *compressor) store(p []byte) []byte {
	if cap(c.scratch) > keptScratch {
		c.scratch = nil
	}
	c.sizes = append(c.sizes, uint64(len(p)))
	if len(p) == 0 || len(p) > maxPackedSample {
		c.compressions = append(c.compressions, compressionRaw)
		return p
	}
	packed := c.compress(p)
	if len(packed) == 0 || len(packed) >= len(p) {
		c.compressions = append(c.compressions, compressionRaw)
		return p
	}
	c.compressions = append(c.compressions, c.compression)
	return packed
}

// compress returns p compressed into the scratch buffer, or nothing when that fails.
func (c *compressor) compress(p []byte) []byte {
	if c.compression == compressionZstd {
		c.scratch = zstdEncoder().EncodeAll(p, c.scratch[:0])
		return c.scratch
	}
	bound := lz4.CompressBlockBound(len(p))
	if cap(c.scratch) < bound {
		c.scratch = make([]byte, bound)
	}
	n, err := c.lz4.CompressBlock(p, c.scratch[:bound])
	if err != nil {
		return nil
	}
	return c.scratch[:n]
}

// record builds the extension record for the samples stored so far.
func (c *compressor) record() []byte {
	count := uint64(len(c.sizes))
	size, _ := extRecordSize(count)
	rec := make([]byte, 0, size)
	rec = append(rec, extMagic...)
	rec = le.AppendUint32(rec, extVersion)
	rec = le.AppendUint32(rec, 0)
	rec = le.AppendUint64(rec, count)
	for _, s := range c.sizes {
		rec = le.AppendUint64(rec, s)
	}
	rec = append(rec, c.compressions...)
	return le.AppendUint32(rec, checksumIEEE(rec))
}

// decode writes the original bytes of a sample stored as src with compression into dst, whose
// length is the original size, and nowhere else: dst is usually one slot of a batch buffer,
// the next sample's slot (perhaps being filled by another goroutine) or the caller's memory
// right behind it. The decompressor is given dst with its capacity cut to its length, so that no
// decoder can use the bytes past the slot as scratch (the Zstandard decoder does when it
// may), and what it returns must be dst itself, whole.
func decode(compression byte, src, dst []byte) error {
	slot := dst[:len(dst):len(dst)]
	var out []byte
	var err error
	switch compression {
	case compressionRaw:
		if len(src) != len(dst) {
			return fmt.Errorf("%w: raw sample of %d bytes recorded as %d bytes", ErrCorrupt, len(src), len(dst))
		}
		out = slot[:copy(slot, src)]
	case compressionLZ4:
		// UncompressBlock bounds its writes by len(slot), never by its capacity.
		var n int
		n, err = lz4.UncompressBlock(src, slot)
		if err == nil {
			out = slot[:n]
		}
	case compressionZstd:
		out, err = zstdDecode(src, slot)
	default:
		return fmt.Errorf("%w: unknown compression %d in the extension record", ErrCorrupt, compression)
	}
	if err != nil || !isWhole(out, dst) {
		return fmt.Errorf("%w: %s sample of %d bytes does not decode to %d bytes",
			ErrCorrupt, compressionName(compression), len(src), len(dst))
	}
	return nil
}

// isWhole reports whether out is exactly dst: same start, same length.
func isWhole(out, dst []byte) bool {
	return len(out) == len(dst) && (len(out) == 0 || &out[0] == &dst[0])
}

func compressionName(compression byte) string {
	switch compression {
	case compressionLZ4:
		return "LZ4"
	case compressionZstd:
		return "Zstandard"
	}
	return "raw"
}
