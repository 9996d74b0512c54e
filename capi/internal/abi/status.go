package abi

import (
	"errors"
	"io"
	"io/fs"

	"github.com/ffrecord/ffrecord/core"
	"github.com/ffrecord/ffrecord/core/remote"
)

// Status codes, mirrored from ffrecord.h (a test keeps the two in step).
const (
	StatusOK       int32 = 0
	StatusInvalid  int32 = -1
	StatusIndex    int32 = -2
	StatusIO       int32 = -3
	StatusNotFound int32 = -4
	StatusCorrupt  int32 = -5
	StatusChecksum int32 = -6
	StatusClosed   int32 = -7
	StatusHandle   int32 = -8
	StatusShortBuf int32 = -9
	StatusInternal int32 = -10
)

// Reader flags and writer compressions, mirrored from ffrecord.h.
const (
	FlagCheckData     uint32 = 1
	FlagDirect        uint32 = 2
	FlagNoDescriptors uint32 = 4

	CompressNone int32 = 0
	CompressLZ4  int32 = 1
	CompressZstd int32 = 2
)

// The fields of ffr_reader_file_info and the values of its metadata field, mirrored from
// ffrecord.h.
const (
	InfoSamples = iota
	InfoStored
	InfoCompression
	InfoHeaderBytes
	InfoDataBytes
	InfoFileBytes
	InfoMetadata
	InfoReadFrom
	InfoFields
)

// What ffr_locate says a path names.
const (
	PathLocal = uint32(remote.KindLocal)
	PathS3    = uint32(remote.KindS3)
	PathHTTP  = uint32(remote.KindHTTP)
)

const (
	MetadataIntact  = uint64(core.MetadataIntact)
	MetadataLegacy  = uint64(core.MetadataLegacy)
	MetadataDamaged = uint64(core.MetadataDamaged)
)

// The values of ffr_reader_file_info's FFR_INFO_READ_FROM field, mirrored from ffrecord.h.
const (
	ReadLocal  = uint64(core.ReadLocal)
	ReadRemote = uint64(core.ReadRemote)
	ReadCached = uint64(core.ReadCached)
)

// callError is a failure detected by this layer itself (bad handle, NULL pointer, ...),
// which carries its status directly.
type callError struct {
	status int32
	msg    string
}

func (e *callError) Error() string { return e.msg }

// statusOf classifies err. The order matters when an error wraps several causes: the
// most specific class wins.
func statusOf(err error) int32 {
	var ce *callError
	if errors.As(err, &ce) {
		return ce.status
	}
	switch {
	case errors.Is(err, core.ErrIndex):
		return StatusIndex
	case errors.Is(err, core.ErrChecksum):
		return StatusChecksum
	case errors.Is(err, core.ErrCorrupt):
		return StatusCorrupt
	case errors.Is(err, core.ErrClosed):
		return StatusClosed
	case errors.Is(err, io.ErrShortBuffer):
		return StatusShortBuf
	case errors.Is(err, core.ErrInvalid), errors.Is(err, remote.ErrBadURL), errors.Is(err, remote.ErrUnsupported):
		return StatusInvalid
	case errors.Is(err, fs.ErrNotExist):
		return StatusNotFound
	}
	// Operating-system errors (*fs.PathError, syscall.Errno) and whatever else the I/O
	// engine reports are failures to do I/O, not misuse by the caller nor a library bug.
	return StatusIO
}
