package core

import (
	"fmt"
	"io/fs"

	"github.com/ffrecord/ffrecord/core/remote"
	"golang.org/x/sys/unix"
)

// DescribeFile reads the stamp of the FFRecord file at path, a local path or a URL, and
// when remote its ETag: from the file's first bytes, with one request when remote (its size
// and ETag come with them). A file too short for a header is ErrCorrupt.
func DescribeFile(path string, opts remote.Options) (stamp FileStamp, etag string, err error) {
	if err := checkPath(path); err != nil {
		return stamp, "", err
	}
	local, kind, err := remote.Locate(path)
	var prefix []byte
	if kind != remote.KindLocal {
		client, err := remote.For(opts)
		if err != nil {
			return stamp, "", fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		obj, err := client.Object(path)
		if err != nil {
			return stamp, "", fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		var size int64
		if prefix, size, etag, err = obj.Prefix(fixedHeaderSize); err != nil {
			return stamp, "", err
		}
		stamp.Bytes = uint64(size)
	} else {
		if err != nil {
			return stamp, "", errorf(path, -1, ErrInvalid, "%v", err)
		}
		fd, size, err := openRegular(local, 0)
		if err != nil {
			return stamp, "", err
		}
		defer unix.Close(fd)
		prefix = make([]byte, min(size, fixedHeaderSize))
		if n, err := unix.Pread(fd, prefix, 0); err != nil || n < len(prefix) {
			return stamp, "", &fs.PathError{Op: "read", Path: path, Err: fileErrno(err)}
		}
		stamp.Bytes = size
	}
	if len(prefix) < fixedHeaderSize {
		return stamp, "", errorf(path, -1, ErrCorrupt, "%d bytes: too short for a header", stamp.Bytes)
	}
	stamp.HeaderChecksum, stamp.Stored = le.Uint32(prefix), le.Uint64(prefix[metaChecksumSize:])
	return stamp, etag, nil
}

// fileErrno is the errno of a read that failed, or EIO for one cut short.
func fileErrno(err error) error {
	if err != nil {
		return err
	}
	return unix.EIO
}
