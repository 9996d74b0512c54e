package core

import (
	"os"
)

// writeHeader writes the header for samples with checksums crcs at relative offsets rel
// at the start of f, streaming it through buf and computing the metadata checksum as it
// goes, so that no copy of the whole header is ever built.
func writeHeader(f *os.File, crcs []uint32, rel []uint64, buf []byte) error {
	n := uint64(len(crcs))
	dataAt, _ := headerSize(n)
	var meta uint32
	pos := int64(metaChecksumSize)
	emit := func(force bool) error {
		if len(buf) == 0 || (!force && len(buf) < writeBuffer-offsetSize) {
			return nil
		}
		meta = updateIEEE(meta, buf)
		if _, err := f.WriteAt(buf, pos); err != nil {
			return err
		}
		pos += int64(len(buf))
		buf = buf[:0]
		return nil
	}
	buf = le.AppendUint64(buf, n)
	for _, c := range crcs {
		buf = le.AppendUint32(buf, c)
		if err := emit(false); err != nil {
			return err
		}
	}
	for _, off := range rel {
		buf = le.AppendUint64(buf, dataAt+off)
		if err := emit(false); err != nil {
			return err
		}
	}
	if err := emit(true); err != nil {
		return err
	}
	_, err := f.WriteAt(le.AppendUint32(buf[:0], meta), 0)
	return err
}
