package source

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/klauspost/crc32"
	"golang.org/x/sys/unix"
)

// Every file of a cache directory (chunk, header entry, remembered document, lock,
// download under way) was written by this package, yet each is opened as untrusted: it
// may have been replaced by a symlink, a FIFO or another entry's copy, damaged on disk, or
// left by an older layout. So a cache file is opened without following a symlink and
// without blocking, checked to be a regular file before anything is read, read only
// within the size its name implies, and used only when its seal matches what its name
// should hold; anything else is a miss, deleted and fetched again.

// errNotCacheFile: what a cache file's name leads to is not a regular file (a symlink, a
// FIFO, a device, a directory): never read, and deleted when found.
var errNotCacheFile = errors.New("not a regular file")

// openCacheFile opens the cache file at path (flag: os.O_RDONLY or os.O_RDWR, and
// os.O_CREATE for a lock file) and returns it with its status. A symlink is not followed
// and a FIFO not waited on: both, and anything else not a regular file, are
// errNotCacheFile.
func openCacheFile(path string, flag int) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Open(path, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.ELOOP) {
		return nil, st, fmt.Errorf("%s: a symlink: %w", path, errNotCacheFile)
	}
	if err != nil {
		return nil, st, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, st, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = unix.Close(fd)
		return nil, st, fmt.Errorf("%s: %w", path, errNotCacheFile)
	}
	// Blocking again: O_NONBLOCK only kept a FIFO from blocking the open.
	if err := unix.SetNonblock(fd, false); err != nil {
		_ = unix.Close(fd)
		return nil, st, &fs.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), st, nil
}

// dropCacheFile deletes what stands at path when opening it found no cache file there:
// the next writer puts one in its place.
func dropCacheFile(path string, err error) {
	if errors.Is(err, errNotCacheFile) {
		_ = os.Remove(path)
	}
}

// A cache file is its payload followed by a seal: the SHA-256 of the identity of what the
// payload is (an Identity: the object's URL, ETag and size, and for a chunk its byte
// range), the payload's CRC-32 (IEEE, little endian) and sealMagic. The seal binds the
// bytes to the name they are found under: a copy of another chunk, an entry planted for
// another object or left by an older layout (no seal, or another magic) does not match.
const (
	sealMagic = "ffrseal1"
	sealSize  = sha256.Size + 4 + 8 // the identity, the CRC-32, sealMagic
)

// Identity is what a cache file holds, as the SHA-256 of its kind and its source's
// identity.
type Identity [sha256.Size]byte

// identify is the Identity of a cache file of a kind ("chunk", or an entry's kind) whose
// source is identified by fields.
func identify(kind string, fields ...any) Identity {
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "ffrecord cache\x00%s", kind)
	for _, f := range fields {
		_, _ = fmt.Fprintf(h, "\x00%v", f)
	}
	var id Identity
	h.Sum(id[:0])
	return id
}

// seal writes into tail (sealSize bytes) the seal of a payload of identity id and CRC-32
// sum.
func seal(tail []byte, id Identity, sum uint32) {
	n := copy(tail, id[:])
	le32(tail[n:], sum)
	copy(tail[n+4:], sealMagic)
}

// sealed reports whether tail (sealSize bytes) seals a payload of identity id, and the
// payload's CRC-32 it records.
func sealed(tail []byte, id Identity) (sum uint32, ok bool) {
	if len(tail) != sealSize || string(tail[:sha256.Size]) != string(id[:]) ||
		string(tail[sha256.Size+4:]) != sealMagic {
		return 0, false
	}
	b := tail[sha256.Size:]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24, true
}

// sealedFile is payload followed by its seal as id's.
func sealedFile(payload []byte, id Identity) []byte {
	out := make([]byte, len(payload)+sealSize)
	copy(out, payload)
	seal(out[len(payload):], id, crc32.ChecksumIEEE(payload))
	return out
}

func le32(b []byte, v uint32) { b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24) }
