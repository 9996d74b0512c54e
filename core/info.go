package core

import (
	"fmt"
	"io"
)

// MetadataState is what a file's metadata checksum says.
type MetadataState int

const (
	// MetadataIntact: the stored checksum matches the header (and a compressed file's
	// extension record matches its own checksum).
	MetadataIntact MetadataState = iota
	// MetadataLegacy: the stored checksum is 0, the mark of files from old writers; the
	// header is read without that check.
	MetadataLegacy
	// MetadataDamaged: a checksum does not match; Verify reports why.
	MetadataDamaged
)

// ReadFrom is where a file's sample data is read from.
type ReadFrom int

const (
	// ReadLocal: a local file.
	ReadLocal ReadFrom = iota
	// ReadRemote: an object read with range requests, sample by sample, in every process
	// and every epoch (no chunk cache).
	ReadRemote
	// ReadCached: an object read through the node's chunk cache.
	ReadCached
)

// FileInfo describes one file of a dataset as it is stored.
type FileInfo struct {
	Path        string
	Samples     uint64 // samples a reader shows
	Stored      uint64 // samples in the header, a compressed file's extension record included
	Compression Compression
	HeaderBytes uint64 // the header: checksums and offsets
	DataBytes   uint64 // sample data as stored (compressed, the extension record included)
	FileBytes   uint64
	Metadata    MetadataState
	ReadFrom    ReadFrom
}

// FileInfo describes file k of the dataset (0 <= k < len(Files())). Its metadata is
// checked the first time a file is asked about or verified, once per Reader.
func (r *Reader) FileInfo(k int) (FileInfo, error) {
	if err := r.acquire(); err != nil {
		return FileInfo{}, err
	}
	defer r.mu.RUnlock()
	if k < 0 || k >= len(r.files) {
		return FileInfo{}, fmt.Errorf("%w: file %d of a dataset of %d files", ErrIndex, k, len(r.files))
	}
	f := r.files[k]
	info := FileInfo{
		Path: f.path, Samples: f.samples(), Stored: f.stored, Compression: CompressNone,
		HeaderBytes: f.header, DataBytes: f.size - f.header, FileBytes: f.size,
		Metadata: r.metadata(k).state, ReadFrom: f.readFrom(),
	}
	if f.ext != nil {
		info.Compression = f.ext.compression()
	}
	return info, nil
}

// FileStamp is what a file of a dataset says it holds, known from its first 12 bytes: its
// size, the sample count its header stores and the CRC-32 the header stores of its sample
// tables (which hold every sample's CRC-32). Another file with the same stamp has the same
// tables, so the same samples, to what the checksums tell; a file replaced by other data
// has another. The checksum is as stored, unchecked (0 for an old writer's file, whose
// stamp is then its size and count alone): telling the file opened from a replaced one
// costs no read. A pickled copy of a reader compares it; a dataset's manifest records it.
type FileStamp struct {
	Bytes          uint64
	Stored         uint64
	HeaderChecksum uint32
}

// FileStamp is the stamp of file k of the dataset (0 <= k < len(Files())), as opened.
func (r *Reader) FileStamp(k int) (FileStamp, error) {
	if err := r.acquire(); err != nil {
		return FileStamp{}, err
	}
	defer r.mu.RUnlock()
	if k < 0 || k >= len(r.files) {
		return FileStamp{}, fmt.Errorf("%w: file %d of a dataset of %d files", ErrIndex, k, len(r.files))
	}
	f := r.files[k]
	return FileStamp{Bytes: f.size, Stored: f.stored, HeaderChecksum: f.stamp}, nil
}

// FileHeader copies the per-sample tables of file k as stored, the way the reference's
// get_offsets and get_checksums show them: offsets[i] is where stored sample i begins and
// offsets[Stored] is the file size (so sample i spans offsets[i] to offsets[i+1]);
// checksums[i] is its stored CRC-32. The tables hold every stored sample, a compressed
// file's extension record included. offsets needs room for Stored+1 entries and checksums
// for Stored; a smaller one is io.ErrShortBuffer.
func (r *Reader) FileHeader(k int, offsets []uint64, checksums []uint32) error {
	if err := r.acquire(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	if k < 0 || k >= len(r.files) {
		return fmt.Errorf("%w: file %d of a dataset of %d files", ErrIndex, k, len(r.files))
	}
	f := r.files[k]
	if uint64(len(offsets)) < f.stored+1 || uint64(len(checksums)) < f.stored {
		return fmt.Errorf("%w: file %d stores %d samples: room for %d offsets and %d checksums needed, got %d and %d",
			io.ErrShortBuffer, k, f.stored, f.stored+1, f.stored, len(offsets), len(checksums))
	}
	where := func() (string, int64) { return f.path, -1 }
	return withFaultGuard(where, func() error {
		for i := uint64(0); i < f.stored; i++ {
			offsets[i] = le.Uint64(f.data[offsetPos(f.stored, i):])
			checksums[i] = f.checksum(i)
		}
		offsets[f.stored] = f.size
		return nil
	})
}
