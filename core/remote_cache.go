package core

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/ffrecord/ffrecord/core/source"
)

// headerCache keeps the header of remote files on local disk, so that the processes of a
// job (DataLoader workers, one per GPU) fetch a large header once. An entry is keyed by
// URL, ETag and size, so a replaced object is never answered with its old header; an
// object without an ETag is not cached. An entry holds the header, then the bytes of the
// last sample when they were fetched (extension record): [0, header) ++ [tail, size).
type headerCache struct {
	dir, url, etag string
	size           uint64
}

func (c *headerCache) path() string {
	if c.dir == "" || c.etag == "" {
		return ""
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", c.url, c.etag, c.size))
	return filepath.Join(c.dir, hex.EncodeToString(sum[:20])+".ffrh")
}

// lock holds an exclusive flock on the entry's lock file (created, never deleted) until
// the returned function is called, so that the processes opening the object at once fetch
// its header once. Without a cache, or when the lock cannot be taken, nothing is held:
// the lock saves requests, correctness never depends on it.
func (c *headerCache) lock() (unlock func()) {
	p := c.path()
	if p == "" || os.MkdirAll(c.dir, 0o755) != nil {
		return func() {}
	}
	f, err := source.LockFile(p+".lock", unix.LOCK_EX)
	if err != nil {
		return func() {}
	}
	return func() { source.Unlock(f) }
}

// load fills image from the cache and reports whether it could. A damaged entry is a
// miss (the metadata checksum still guards what is used).
func (c *headerCache) load(image []byte) bool {
	p := c.path()
	if p == "" {
		return false
	}
	entry, err := os.ReadFile(p)
	if err != nil || uint64(len(entry)) < fixedHeaderSize {
		return false
	}
	header, ok := headerSize(le.Uint64(entry[metaChecksumSize:]))
	if !ok || header > c.size || uint64(len(entry)) < header || uint64(len(entry))-header > c.size-header {
		return false
	}
	tail := entry[header:]
	copy(image, entry[:header])
	copy(image[c.size-uint64(len(tail)):], tail)
	return true
}

// store writes the header (and the tail, when present in the image) as an entry. The
// entry is written aside and renamed into place, so readers never see half of one;
// failing to cache is not an error.
func (c *headerCache) store(image []byte) {
	p := c.path()
	if p == "" {
		return
	}
	header, ok := headerSize(le.Uint64(image[metaChecksumSize:]))
	if !ok || header > c.size {
		return
	}
	entry := append([]byte(nil), image[:header]...)
	f := &dataFile{data: image, size: c.size}
	if off, end, ok := f.tailSpan(header); ok {
		entry = append(entry, image[off:end]...)
	}
	writeEntry(c.dir, p, entry)
}

// writeEntry writes an entry of the cache directory dir at path p aside and renames it
// into place, so readers never see half of one; failing to cache is not an error.
func writeEntry(dir, p string, entry []byte) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, ".entry-*")
	if err != nil {
		return
	}
	_, err = tmp.Write(entry)
	if closeErr := tmp.Close(); err == nil && closeErr == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
}

// A small document fetched whole (a dataset's spec.json) is remembered in the cache
// directory, keyed by URL alone: the last copy seen, which may no longer be the object's.
// It is a guess of what the next fetch returns, so that a reader can start what depends
// on it (opening a dataset's field files, a round trip each) while that fetch is under
// way; the fetch confirms or refutes it, and a refuted guess is thrown away.

// rememberedPath is where dir keeps the last copy of the document at url ("" without a dir).
func rememberedPath(dir, url string) string {
	if dir == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(url))
	return filepath.Join(dir, hex.EncodeToString(sum[:20])+".text")
}

// RememberText keeps data as the last copy seen of the document at url in dir.
func RememberText(dir, url string, data []byte) {
	if p := rememberedPath(dir, url); p != "" {
		writeEntry(dir, p, data)
	}
}

// RememberedText is the last copy of the document at url that RememberText kept in dir.
func RememberedText(dir, url string) ([]byte, bool) {
	p := rememberedPath(dir, url)
	if p == "" {
		return nil, false
	}
	data, err := os.ReadFile(p)
	return data, err == nil
}
