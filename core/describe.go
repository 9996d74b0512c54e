package core

import (
	"fmt"
	"io/fs"

	"github.com/ffrecord/ffrecord/core/remote"
	"golang.org/x/sys/unix"
)

// FileVersion is a file as a dataset's manifest records it: its size, the sample count and
// metadata checksum its header stores (its first 12 bytes, which change with any change to
// the header), and, remote, its ETag. A file found at open with other values is another
// file than the one recorded.
type FileVersion struct {
	Size         uint64
	Stored       uint64
	MetaChecksum uint32
	ETag         string
}

// DescribeFile reads the version of the FFRecord file at path, a local path or a URL: from
// the file's first bytes, with one request when remote (its size and ETag come with them).
// A file too short for a header is ErrCorrupt.
func DescribeFile(path string, opts remote.Options) (FileVersion, error) {
	if err := checkPath(path); err != nil {
		return FileVersion{}, err
	}
	local, kind, err := remote.Locate(path)
	var prefix []byte
	var v FileVersion
	if kind != remote.KindLocal {
		client, err := remote.For(opts)
		if err != nil {
			return v, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		obj, err := client.Object(path)
		if err != nil {
			return v, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		var size int64
		if prefix, size, v.ETag, err = obj.Prefix(fixedHeaderSize); err != nil {
			return v, err
		}
		v.Size = uint64(size)
	} else {
		if err != nil {
			return v, errorf(path, -1, ErrInvalid, "%v", err)
		}
		fd, size, err := openRegular(local, 0)
		if err != nil {
			return v, err
		}
		defer unix.Close(fd)
		prefix = make([]byte, min(size, fixedHeaderSize))
		if n, err := unix.Pread(fd, prefix, 0); err != nil || n < len(prefix) {
			return v, &fs.PathError{Op: "read", Path: path, Err: fileErrno(err)}
		}
		v.Size = size
	}
	if len(prefix) < fixedHeaderSize {
		return v, errorf(path, -1, ErrCorrupt, "%d bytes: too short for a header", v.Size)
	}
	v.MetaChecksum, v.Stored = le.Uint32(prefix), le.Uint64(prefix[metaChecksumSize:])
	return v, nil
}

// fileErrno is the errno of a read that failed, or EIO for one cut short.
func fileErrno(err error) error {
	if err != nil {
		return err
	}
	return unix.EIO
}
