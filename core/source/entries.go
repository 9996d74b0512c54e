package source

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/crc32"
)

// Entries are the cache files kept beside the chunks, in the cache directory itself: a
// remote file's header (HeaderEntry, keyed by URL, ETag and size), so that the processes
// of a job fetch a large header once, and the last copy of a small document (TextEntry,
// keyed by URL alone). Each is named after its key's digest and sealed as that key's
// (cachefile.go), read whole within a size bound, counted against the limit and evicted
// with the chunks, least recently used first. One that is not whole and sealed as its
// key's (planted, damaged, left by an older layout, a symlink or a FIFO) is a miss: it is
// deleted, never used, and the caller fetches its source again.

// An Entry names one entry of a cache directory.
type Entry struct {
	name string // the file's name
	id   Identity
}

// entryKinds are the extensions of entries' file names.
var entryKinds = []string{".ffrh", ".text"}

// HeaderEntry is the entry of the header of the remote file at url of that ETag and size.
func HeaderEntry(url, etag string, size uint64) Entry { return entry("ffrh", url, etag, size) }

// TextEntry is the entry of the last copy seen of the document at url.
func TextEntry(url string) Entry { return entry("text", url) }

func entry(kind string, key ...any) Entry {
	h := sha256.New()
	for i, k := range key {
		if i > 0 {
			_, _ = h.Write([]byte{0})
		}
		_, _ = fmt.Fprint(h, k)
	}
	return Entry{name: hex.EncodeToString(h.Sum(nil)[:20]) + "." + kind, id: identify(kind, key...)}
}

// isEntryName reports whether name is an entry's: 40 hex digits and an entry kind's
// extension (only these are counted and evicted: the cache directory may hold the user's
// own files).
func isEntryName(name string) bool {
	for _, kind := range entryKinds {
		if digest, ok := strings.CutSuffix(name, kind); ok && len(digest) == 40 {
			_, err := hex.DecodeString(digest)
			return err == nil
		}
	}
	return false
}

// Load is entry e's payload, of at most max bytes, when the cache holds it whole and
// sealed as e's; otherwise false, and what stood under its name is deleted.
func (s *Store) Load(e Entry, max int64) ([]byte, bool) {
	path := filepath.Join(s.root, e.name)
	f, st, err := openCacheFile(path, os.O_RDONLY)
	if err != nil {
		dropCacheFile(path, err)
		return nil, false
	}
	defer f.Close()
	if st.Size < sealSize || st.Size-sealSize > max {
		_ = os.Remove(path)
		return nil, false
	}
	data := make([]byte, st.Size)
	n := len(data) - sealSize
	if _, err := f.ReadAt(data, 0); err != nil {
		_ = os.Remove(path) // cut short since its status was taken: not a whole entry
		return nil, false
	}
	if sum, ok := sealed(data[n:], e.id); !ok || crc32.ChecksumIEEE(data[:n]) != sum {
		if names(path, st) {
			_ = os.Remove(path)
		}
		return nil, false
	}
	if now := time.Now(); now.Sub(time.Unix(st.Mtim.Unix())) > time.Second {
		_ = os.Chtimes(path, now, now) // recency for LRU eviction
	}
	return data[:n], true
}

// Save keeps payload as entry e: written aside, in room reserved as for a chunk, then
// renamed into place. Failing to cache is not an error: the entry is fetched again next
// time. stats (nil: none) counts the evictions it makes.
func (s *Store) Save(e Entry, payload []byte, stats *Stats) {
	tmp, err := s.reserve(int64(len(payload))+sealSize, stats)
	if err != nil || tmp == nil {
		return
	}
	if writeCacheFile(tmp, sealedFile(payload, e.id)) != nil || s.publish(tmp, filepath.Join(s.root, e.name)) != nil {
		discard(tmp)
		return
	}
	Unlock(tmp)
}

// LockEntry takes the lock of entry e (Release drops it), so that the processes that need
// it at once fetch its source once.
func (s *Store) LockEntry(e Entry) (*Lock, error) {
	return Acquire(filepath.Join(s.root, e.name+".lock"))
}
