package core

import (
	"os"
)

// writeHeader writes the header for samples with checksums crcs at relative offsets rel
// at the start of f, streaming it through buf (up to writeBuffer bytes at a time) and
// computing the metadata checksum as it goes, so that no copy of the whole header is ever
// built. Entries are encoded a buffer at a time, in loops of their own: a call per entry
// cost ~10 ns, 30 ms of a million samples' Close.
func writeHeader(f *os.File, crcs []uint32, rel []uint64, buf []byte) error {
	n := uint64(len(crcs))
	dataAt, _ := headerSize(n)
	if cap(buf) < writeBuffer {
		buf = make([]byte, 0, writeBuffer)
	}
	var meta uint32
	pos := int64(metaChecksumSize)
	emit := func() error {
		meta = updateIEEE(meta, buf)
		if _, err := f.WriteAt(buf, pos); err != nil {
			return err
		}
		pos += int64(len(buf))
		buf = buf[:0]
		return nil
	}
	buf = le.AppendUint64(buf[:0], n)
	for len(crcs) > 0 {
		at := len(buf)
		k := min(len(crcs), (writeBuffer-at)/4)
		buf = buf[:at+4*k]
		for i, c := range crcs[:k] {
			le.PutUint32(buf[at+4*i:], c)
		}
		if crcs = crcs[k:]; len(crcs) > 0 {
			if err := emit(); err != nil {
				return err
			}
		}
	}
	for len(rel) > 0 {
		at := len(buf)
		k := min(len(rel), (writeBuffer-at)/offsetSize)
		if k == 0 {
			if err := emit(); err != nil {
				return err
			}
			continue
		}
		buf = buf[:at+offsetSize*k]
		for i, off := range rel[:k] {
			le.PutUint64(buf[at+offsetSize*i:], dataAt+off)
		}
		rel = rel[k:]
		if len(rel) > 0 {
			if err := emit(); err != nil {
				return err
			}
		}
	}
	if err := emit(); err != nil {
		return err
	}
	_, err := f.WriteAt(le.AppendUint32(buf[:0], meta), 0)
	return err
}
