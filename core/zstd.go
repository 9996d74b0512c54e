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
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0),
			zstd.WithDecoderMaxMemory(maxPackedSample), zstd.IgnoreChecksum(true))
		if err != nil {
			panic(err)
		}
		return dec
	})
)

// zstdDecode decodes the Zstandard frame src into dst, whose length is the recorded
// original size. A frame that declares another size is refused before decoding; one that
// declares none (the encoder omits it for inputs of a few hundred bytes) can make the
// decoder allocate at most maxPackedSample.
func zstdDecode(src, dst []byte) error {
	var h zstd.Header
	if err := h.Decode(src); err != nil || (h.HasFCS && h.FrameContentSize != uint64(len(dst))) {
		return fmt.Errorf("%w: Zstandard frame of %d bytes does not declare %d bytes", ErrCorrupt, len(src), len(dst))
	}
	out, err := zstdDecoder().DecodeAll(src, dst[:0])
	if err != nil || len(out) != len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
		return fmt.Errorf("%w: Zstandard frame of %d bytes does not decode to %d bytes", ErrCorrupt, len(src), len(dst))
	}
	return nil
}
