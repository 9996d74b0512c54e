package core

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"time"

	"golang.org/x/sys/unix"
)

// validationChunk is how much of a mapping a validation pass touches before handing the
// pages back with MADV_DONTNEED, so that checking a 60 MB header never makes it resident
// in this process (the page cache keeps it for everyone).
const validationChunk = 4 << 20

// dataFile is one open FFRecord file. The whole file is mapped read-only and shared: the
// header is read in place, never copied, so many processes reading the same dataset share
// one copy of it in the page cache.
type dataFile struct {
	path     string
	fd       int    // O_RDONLY, for the batch engine
	directFd int    // O_DIRECT descriptor when the reader is in direct mode, else -1
	size     uint64 // file size at open; every offset is checked against it
	data     []byte // MAP_SHARED, PROT_READ mapping of [0, size)
	stored   uint64 // N of the base format, an extension record included
	header   uint64 // 12 + 12·stored: where sample data starts
	ext      *extension
	stamp    uint32        // the header's stored metadata checksum, read at open (FileStamp)
	verified *FileIdentity // this version of the file passed the checks of CheckData
	remote   *remoteFile   // set when the file is read over the network (remote_source.go)
	// fileMapped: data is the file's shared mapping, whose released pages fault back in
	// from the page cache; other memory (a remote file's private image, a test's slice)
	// would read back as zeros, and release leaves it alone.
	fileMapped bool
}

// samples is the number of samples a user sees in this file.
func (f *dataFile) samples() uint64 {
	if f.ext != nil {
		return f.ext.count
	}
	return f.stored
}

// openDataFile opens, maps and checks one file. With opts.CheckData, the metadata checksum
// and the ordering of every offset are validated now, unless this version of the file
// already passed (opts.Verified, or an earlier Open in this process); without, only what
// is needed to find the tables, and each offset is checked when it is used.
func openDataFile(path string, opts ReaderOptions) (_ *dataFile, warnings []string, err error) {
	start := time.Now()
	fd, size, err := openRegular(path, 0)
	if err != nil {
		return nil, nil, err
	}
	check, direct := opts.CheckData, opts.Direct
	f := &dataFile{path: path, fd: fd, directFd: -1, size: size}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	if err := checkMappable(path, f.size); err != nil {
		return nil, nil, err
	}
	// Batches read random samples: readahead on this descriptor (the engine's cold reads)
	// would fetch up to 128 KiB around every small sample.
	_ = unix.Fadvise(fd, 0, 0, unix.FADV_RANDOM)
	f.data, err = unix.Mmap(fd, 0, int(f.size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "mmap", Path: path, Err: err}
	}
	f.fileMapped = true
	if direct {
		if f.directFd, err = openDirect(path); err != nil {
			if !errors.Is(err, unix.EINVAL) {
				return nil, nil, err
			}
			warnings = append(warnings, fmt.Sprintf(
				"%s: O_DIRECT is not supported here; reading through the page cache", path))
		}
	}
	var id FileIdentity
	known := false
	if check {
		if id, err = identityOf(fd, path); err != nil {
			return nil, nil, err
		}
		known = alreadyVerified(id, opts.Verified)
	}
	where := func() (string, int64) { return path, -1 }
	if err := withFaultGuard(where, func() error { return f.parseHeader(check && !known, &warnings) }); err != nil {
		return nil, nil, err
	}
	if check && (known || noteVerified(id, start)) {
		f.verified = &id
	}
	return f, warnings, nil
}

func openDirect(path string) (int, error) {
	fd, _, err := openRegular(path, unix.O_DIRECT)
	return fd, err
}

// openRegular opens path read-only (with extra flags) and returns its descriptor and size,
// refusing anything but a regular file. The open is non-blocking, so that a FIFO (which
// would wait for a writer forever) or a device is refused at once by the fstat behind it;
// O_NONBLOCK is cleared again on the regular file, because io_uring honours it and would
// fail reads that miss the page cache with EAGAIN.
func openRegular(path string, flags int) (fd int, size uint64, err error) {
	fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|flags, 0)
	if err != nil {
		return -1, 0, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer func() {
		if err != nil {
			_ = unix.Close(fd)
		}
	}()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return -1, 0, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if kind := st.Mode & unix.S_IFMT; kind != unix.S_IFREG {
		return -1, 0, errorf(path, -1, ErrInvalid, "not a regular file but %s", fileKinds[kind])
	}
	status, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, status&^unix.O_NONBLOCK)
	}
	if err != nil {
		return -1, 0, &fs.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return fd, uint64(st.Size), nil
}

// fileKinds names what openRegular refuses.
var fileKinds = map[uint32]string{
	unix.S_IFIFO: "a FIFO", unix.S_IFCHR: "a character device", unix.S_IFBLK: "a block device",
	unix.S_IFSOCK: "a socket", unix.S_IFDIR: "a directory",
}

func (f *dataFile) parseHeader(check bool, warnings *[]string) error {
	f.stored = le.Uint64(f.data[metaChecksumSize:])
	header, ok := headerSize(f.stored)
	if !ok || header > f.size {
		return errorf(f.path, -1, ErrCorrupt,
			"header of %d samples does not fit in a file of %d bytes", f.stored, f.size)
	}
	f.header = header
	f.stamp = le.Uint32(f.data)
	if f.stamp == 0 {
		*warnings = append(*warnings, fmt.Sprintf(
			"%s: metadata checksum is 0 (file from an old writer): metadata not validated", f.path))
	}
	if check {
		if err := f.checkHeader(warnings); err != nil {
			return err
		}
	}
	ext, err := f.findExtension()
	if err != nil {
		return err
	}
	f.ext = ext
	return nil
}

// checkMetadata compares the stored metadata checksum with the header's bytes; a stored
// 0 (old writers) is accepted unchecked.
func (f *dataFile) checkMetadata() error {
	stored := le.Uint32(f.data)
	if stored == 0 {
		return nil
	}
	if got := f.checksumRange(metaChecksumSize, f.header); got != stored {
		return errorf(f.path, -1, ErrChecksum, "metadata: stored 0x%08x, computed 0x%08x", stored, got)
	}
	return nil
}

// checksumRange is the CRC-32 of data[from:to], computed chunk by chunk so that the
// pages it touched can be released behind it.
func (f *dataFile) checksumRange(from, to uint64) uint32 {
	var sum uint32
	for from < to {
		end := min(to, from+validationChunk)
		sum = updateIEEE(sum, f.data[from:end])
		f.release(from, end)
		from = end
	}
	return sum
}

// release drops this process's mapping of the pages covering data[from:to]; they stay in
// the page cache and come back on the next access. Only a file's mapping is released:
// MADV_DONTNEED empties any other memory (fileMapped).
func (f *dataFile) release(from, to uint64) {
	from &^= pageSize - 1
	if !f.fileMapped || from >= to {
		return
	}
	_ = unix.Madvise(f.data[from:to], unix.MADV_DONTNEED)
}

// span is where sample i (of the base format) is stored, bounds-checked against the
// header and the file size.
func (f *dataFile) span(i uint64) (off, end uint64, err error) {
	off = le.Uint64(f.data[offsetPos(f.stored, i):])
	end = f.size
	if i+1 < f.stored {
		end = le.Uint64(f.data[offsetPos(f.stored, i+1):])
	}
	if off < f.header || off > end || end > f.size {
		return 0, 0, errorf(f.path, int64(i), ErrCorrupt,
			"sample spans bytes %d to %d, outside the data area %d to %d of the file",
			off, end, f.header, f.size)
	}
	return off, end, nil
}

// checksum is the stored CRC-32 of sample i.
func (f *dataFile) checksum(i uint64) uint32 {
	return le.Uint32(f.data[checksumPos(i):])
}

// unmapAsideBytes is the mapping size from which Close leaves the unmapping to a goroutine:
// the kernel tears down a page table entry per 4 KiB page a reader touched, ~0.2 µs each
// here, so closing a 200 MB dataset after a shuffled epoch waited 10 ms for it.
const unmapAsideBytes = 16 << 20

// unmap removes a mapping that nothing reads any more; a large one from another goroutine,
// so that the caller does not wait for it.
func unmap(data []byte) {
	if len(data) < unmapAsideBytes {
		_ = unix.Munmap(data)
		return
	}
	go func() { _ = unix.Munmap(data) }()
}

func (f *dataFile) close() {
	if f.remote != nil {
		_ = f.remote.src.Close() // a chunk cache's held chunks
	}
	if f.data != nil {
		unmap(f.data)
		f.data = nil
	}
	if f.directFd >= 0 {
		_ = unix.Close(f.directFd)
		f.directFd = -1
	}
	if f.fd >= 0 {
		_ = unix.Close(f.fd)
		f.fd = -1
	}
}

// checkMappable refuses a file too short for a header or too large to map.
func checkMappable(path string, size uint64) error {
	if size < fixedHeaderSize {
		return errorf(path, -1, ErrCorrupt, "file is %d bytes, shorter than the %d-byte header", size, fixedHeaderSize)
	}
	if size > math.MaxInt {
		return errorf(path, -1, ErrInvalid, "file of %d bytes cannot be mapped", size)
	}
	return nil
}
