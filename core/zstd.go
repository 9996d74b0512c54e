package core

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// One encoder and one decoder serve every Writer and Reader: both are safe for concurrent
// EncodeAll / DecodeAll calls and keep their own pools of per-call state, which would be
// wasted (several MiB each) in one instance per file.
var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		// The sample CRC-32 already covers the stored bytes: the frame checksum would be
		// a second hash of the same data.
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(false))
		if err != nil {
			panic(err) // only invalid options fail, and these are constant
		}
		return enc
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		// WithDecodeAllCapLimit: a frame that would need more than the slot's capacity
		// fails rather than being decoded into a new allocation.
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderMaxMemory(maxPackedSample), zstd.IgnoreChecksum(true))
		if err != nil {
			panic(err)
		}
		return dec
	})
)

// zstdDecode decodes the Zstandard frame src into slot, whose length is the recorded
// original size and whose capacity is no more (see decode), and returns what was decoded.
// A frame that declares another size is refused before decoding; one that declares none
// (the encoder omits it for inputs of a few hundred bytes) is bounded by the capacity.
func zstdDecode(src, slot []byte) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(src); err != nil || (h.HasFCS && h.FrameContentSize != uint64(len(slot))) {
		return nil, fmt.Errorf("%w: Zstandard frame of %d bytes does not declare %d bytes", ErrCorrupt, len(src), len(slot))
	}
	return zstdDecoder().DecodeAll(src, slot[:0])
}
