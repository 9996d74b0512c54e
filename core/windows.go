package core

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"sync"
	"unsafe"
)

// ItemStream is the items of samples 0..len(Starts)-2 concatenated in index order: each
// sample's items are little-endian unsigned integers of ItemSize bytes (1, 2, 4 or 8)
// from byte DataOffsets[k] of the sample (its bytes as ReadBatch returns them), the
// token ids of a tokenized document for instance. Starts[k] is where sample k begins in
// the stream (ascending, Starts[len-1] the stream's length). With a Separator (>= 0), a
// sample's last position in the stream holds it, after the sample's items.
type ItemStream struct {
	Starts      []int64
	DataOffsets []uint64
	ItemSize    int
	Separator   int64
}

// windowScratch is what one ReadWindows call needs besides dst, recycled across calls:
// a batch of language-model blocks has a few ranges and some 100 KiB of raw items.
type windowScratch struct {
	ranges []Range
	dests  []int64 // where range k's first item goes in dst
	seps   []int64 // where a separator goes in dst
	raw    []byte
}

var windowScratches = sync.Pool{New: func() any { return new(windowScratch) }}

// ReadWindows reads windows of the stream, widened to int64, with one ReadRanges call:
// window j is stream positions [blocks[j]*stride, blocks[j]*stride+width), written to
// dst[j*width:(j+1)*width]. A window not wholly inside the stream is an error wrapping
// ErrIndex naming the block; dst shorter than len(blocks)*width wraps io.ErrShortBuffer
// (through ErrInvalid); a malformed stream (starts out of order, a sample's items past
// its end) wraps ErrInvalid or ErrIndex. dst is left alone when the arguments are wrong,
// and may be partly written when a read fails.
func (r *Reader) ReadWindows(s ItemStream, blocks []uint64, stride, width uint64, dst []int64) error {
	samples := len(s.Starts) - 1
	switch {
	case samples < 0 || len(s.DataOffsets) != samples:
		return fmt.Errorf("%w: %d starts need %d data offsets, got %d", ErrInvalid, len(s.Starts),
			max(samples, 0), len(s.DataOffsets))
	case s.ItemSize != 1 && s.ItemSize != 2 && s.ItemSize != 4 && s.ItemSize != 8:
		return fmt.Errorf("%w: item size %d is not 1, 2, 4 or 8", ErrInvalid, s.ItemSize)
	case stride == 0 || width == 0 || width > 1<<40 || stride > 1<<40:
		return fmt.Errorf("%w: windows of %d items every %d: both must be in [1, 2^40]", ErrInvalid, width, stride)
	case uint64(len(dst)) < uint64(len(blocks))*width:
		return fmt.Errorf("%w: %w: %d windows of %d need %d values, the buffer has %d",
			io.ErrShortBuffer, ErrInvalid, len(blocks), width, uint64(len(blocks))*width, len(dst))
	}
	total := s.Starts[samples]
	count := uint64(0) // windows in the stream
	if total >= int64(width) {
		count = (uint64(total)-width)/stride + 1
	}
	gap := int64(0)
	if s.Separator >= 0 {
		gap = 1
	}
	scratch := windowScratches.Get().(*windowScratch)
	defer windowScratches.Put(scratch)
	ranges, dests, separators := scratch.ranges[:0], scratch.dests[:0], scratch.seps[:0]
	rawBytes := uint64(0)
	for j, block := range blocks {
		if block >= count {
			return fmt.Errorf("%w: block %d out of range for %d blocks", ErrIndex, block, count)
		}
		start := int64(block * stride)
		stop := start + int64(width)
		out := int64(j) * int64(width)
		doc := sort.Search(samples, func(k int) bool { return s.Starts[k+1] > start })
		for pos := start; pos < stop; doc++ {
			if doc >= samples {
				return fmt.Errorf("%w: the stream's starts are out of order at sample %d", ErrInvalid, samples)
			}
			low, high := s.Starts[doc], s.Starts[doc+1]
			items := high - low - gap // the sample's items
			if low > pos || high < low || items < 0 {
				return fmt.Errorf("%w: the stream's starts are out of order at sample %d", ErrInvalid, doc)
			}
			end := min(stop, high)
			if taken := min(end, low+items) - pos; taken > 0 {
				offset := s.DataOffsets[doc] + uint64(pos-low)*uint64(s.ItemSize)
				length := uint64(taken) * uint64(s.ItemSize)
				ranges = append(ranges, Range{Index: uint64(doc), Offset: offset, Length: length})
				dests = append(dests, out+pos-start)
				rawBytes += length
			}
			if gap == 1 && end == high {
				separators = append(separators, out+high-1-start)
			}
			pos = end
		}
	}
	scratch.ranges, scratch.dests, scratch.seps = ranges, dests, separators
	if uint64(cap(scratch.raw)) < rawBytes {
		scratch.raw = make([]byte, rawBytes)
	}
	raw := scratch.raw[:rawBytes]
	// Widened straight from where the items were read: the file's mapping when it is in
	// the page cache.
	err := r.readRanges(ranges, raw, func(k int, part []byte) { widen(dst[dests[k]:], part, s.ItemSize) })
	if err != nil {
		return err
	}
	for _, p := range separators {
		dst[p] = s.Separator
	}
	return nil
}

// widen writes the little-endian unsigned items of raw to dst as int64.
func widen(dst []int64, raw []byte, itemSize int) {
	n := len(raw) / itemSize
	if n == 0 {
		return
	}
	dst = dst[:n]
	if !littleEndian { // the items' bytes reversed in memory: decode each
		for i := range dst {
			var word [8]byte
			copy(word[:], raw[i*itemSize:(i+1)*itemSize])
			dst[i] = int64(binary.LittleEndian.Uint64(word[:]))
		}
		return
	}
	// The items as they lie (any alignment: loads of unaligned words are fine where Go
	// runs little-endian), converted in a loop without bounds checks.
	at := unsafe.Pointer(unsafe.SliceData(raw))
	switch itemSize {
	case 1:
		for i, v := range raw[:n] {
			dst[i] = int64(v)
		}
	case 2:
		for i, v := range unsafe.Slice((*uint16)(at), n) {
			dst[i] = int64(v)
		}
	case 4:
		for i, v := range unsafe.Slice((*uint32)(at), n) {
			dst[i] = int64(v)
		}
	default:
		for i, v := range unsafe.Slice((*uint64)(at), n) {
			dst[i] = int64(v)
		}
	}
}

// littleEndian tells whether this machine stores integers as the items are stored.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1
