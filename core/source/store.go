package source

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/klauspost/crc32"
	"golang.org/x/sys/unix"
)

// A Store is a cache directory shared by every process of a node through the file system
// alone, so that nothing depends on a process staying alive:
//
//   - The directory, and its chunks subdirectory, belong to the user and nobody else can
//     write into them (cachedir.go): another user's directory is refused.
//   - A chunk is the file chunks/KEY-OFF-LEN.chunk: its bytes, then their seal (the
//     identity of the object and byte range they are, their CRC-32: cachefile.go). It
//     appears by rename, whole, or not at all. Its seal is checked each time a process
//     opens it: a file planted, copied from another chunk or left by an older layout is
//     deleted and downloaded again.
//   - Downloading a chunk holds the Lock of chunks/NAME.lock, so that one process
//     downloads it while the others wait and then read it. The kernel drops the lock of a
//     process that dies; a lock file exists only while held or waited for (flock.go).
//   - The download is written to chunks/.tmp-LEN-*, itself held under an exclusive flock:
//     one found unlocked was left by a dead process, and is deleted.
//   - Reading a chunk holds a shared flock on it (as long as a reader keeps it mapped:
//     Cached's held chunks); eviction takes the exclusive lock without waiting, so a chunk
//     in use is never evicted.
//   - Entries (a remote file's header, a remembered document: entries.go) lie in the
//     directory itself, sealed as chunks are, and count against the limit as they do.
//   - Space is reserved, and downloads renamed into place, under an exclusive flock on
//     chunks/.evict.lock: the chunks, entries and downloads under way are counted, and the
//     least recently used chunks not in use and entries are evicted until the new one fits
//     the limit. When every chunk is in use, the new one is served from memory without
//     being cached: never a deadlock.
//   - Each process checks a chunk file's CRC-32 the first time it uses it (unless its
//     reader checks every sample's own CRC-32, which covers the same bytes and finds a
//     damaged chunk as surely); a damaged one is deleted and downloaded again.
//   - Every cache file is opened without following a symlink or waiting on a FIFO, and
//     read only when it is a regular file of the size its name implies (cachefile.go).
type Store struct {
	root  string // the cache directory: entries
	dir   string // its chunks directory
	limit int64  // bytes; 0: no limit

	mu       sync.Mutex
	verified map[fileID]bool // chunk files whose CRC-32 this process checked
}

// fileID identifies a chunk file on disk: a chunk replaced by rename has another. (Not its
// times: reading a chunk touches its modification time, for LRU.)
type fileID struct {
	dev, ino uint64
	size     int64
}

func idOf(st *unix.Stat_t) fileID { return fileID{uint64(st.Dev), st.Ino, st.Size} }

var (
	storesMu sync.Mutex
	stores   = map[string]*Store{}
)

// OpenStore returns the store of dir with a limit in bytes (0: none), shared by the readers
// of the process. A directory that another user could write into, or that cannot be
// created or written, is an error now, not at the first read.
func OpenStore(dir string, limit int64) (*Store, error) {
	if limit < 0 {
		return nil, fmt.Errorf("%w: cache_limit %d is negative", ErrCacheLimit, limit)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	chunks := filepath.Join(abs, "chunks")
	// Checked at every open, not once per process: a directory opened fine before may have
	// been opened to others since.
	if err := makePrivateDir(abs, true); err != nil {
		return nil, err
	}
	if err := makePrivateDir(chunks, false); err != nil {
		return nil, err
	}
	key := abs + "\x00" + strconv.FormatInt(limit, 10)
	storesMu.Lock()
	defer storesMu.Unlock()
	if s, ok := stores[key]; ok {
		return s, nil
	}
	s := &Store{root: abs, dir: chunks, limit: limit, verified: map[fileID]bool{}}
	probe, err := os.CreateTemp(s.dir, ".probe-*")
	if err != nil {
		return nil, fmt.Errorf("%w: cache directory %s cannot be written: %w", ErrCache, dir, err)
	}
	_ = probe.Close()
	_ = os.Remove(probe.Name())
	stores[key] = s
	return s, nil
}

// Limit is the store's limit in bytes (0: none).
func (s *Store) Limit() int64 { return s.limit }

// chunk is a chunk ready to be read: an open chunk file under a shared lock (and its
// mapping, once mapFile), or the bytes of a chunk that could not be cached.
type chunk struct {
	f      *os.File
	mem    []byte
	mapped bool // mem is f's mapping
}

// mapFile maps the chunk's n bytes of file to be read from memory, and reports whether
// the chunk is now mapped (not a chunk in memory, an empty one, or a failed mapping).
func (c *chunk) mapFile(n int64) bool {
	if c.f == nil || n <= 0 {
		return false
	}
	mem, err := unix.Mmap(int(c.f.Fd()), 0, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return false
	}
	c.mem, c.mapped = mem, true
	return true
}

// readAhead asks the kernel to read the chunk's file into the page cache
// (POSIX_FADV_WILLNEED queues the read and returns).
func (c *chunk) readAhead() {
	if c.f != nil {
		willNeed(c.f)
	}
}

func willNeed(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_WILLNEED) }

func (c *chunk) readAt(p []byte, off int64) error {
	if c.mem != nil {
		copy(p, c.mem[off:])
		return nil
	}
	_, err := c.f.ReadAt(p, off)
	return err
}

// release drops the chunk's lease.
func (c *chunk) release() {
	if c.mapped {
		_ = unix.Munmap(c.mem)
		c.mem, c.mapped = nil, false
	}
	if c.f != nil {
		Unlock(c.f)
	}
}

// get returns the chunk called name, of n bytes, identity id, downloading it with fetch
// when it is not cached; a cached chunk file's CRC-32 is checked first when check is set.
// The chunk is leased until release.
func (s *Store) get(name string, n int64, id Identity, check bool, fetch func([]byte) error, stats *Stats) (*chunk, error) {
	if c := s.cached(name, n, id, check, stats); c != nil {
		return c, nil
	}
	path := filepath.Join(s.dir, name)
	lock, err := Acquire(path + ".lock")
	if err != nil {
		return nil, s.diskError("locking a chunk", err)
	}
	defer lock.Release()
	if c := s.open(path, n, id, check); c != nil { // another process downloaded it meanwhile
		stats.Hits.Add(1)
		return c, nil
	}
	stats.Misses.Add(1)
	tmp, err := s.reserve(n+sealSize, stats)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n+sealSize)
	if err := fetch(buf[:n]); err != nil {
		discard(tmp)
		return nil, err
	}
	if tmp == nil { // no room: every cached chunk is in use
		stats.Bypassed.Add(1)
		return &chunk{mem: buf[:n]}, nil
	}
	seal(buf[n:], id, crc32.ChecksumIEEE(buf[:n]))
	if err := writeCacheFile(tmp, buf); err != nil {
		discard(tmp)
		return nil, s.diskError(fmt.Sprintf("writing a %s chunk", describe(n)), err)
	}
	if err := s.publish(tmp, path); err != nil {
		discard(tmp)
		return nil, s.diskError("renaming a chunk into place", err)
	}
	Unlock(tmp)
	return &chunk{mem: buf[:n]}, nil
}

// cached returns the chunk called name, of n bytes, identity id, leased, when it is cached
// (see get), else nil.
func (s *Store) cached(name string, n int64, id Identity, check bool, stats *Stats) *chunk {
	c := s.open(filepath.Join(s.dir, name), n, id, check)
	if c != nil {
		stats.Hits.Add(1)
	}
	return c
}

// publish renames a finished download into place, under the eviction lock: a listing
// made under that lock sees the download or the chunk, never neither.
func (s *Store) publish(tmp *os.File, path string) error {
	lock, err := s.evictLock()
	if err != nil {
		return err
	}
	defer Unlock(lock)
	return os.Rename(tmp.Name(), path)
}

// evictLock takes the exclusive flock on chunks/.evict.lock (one file, kept).
func (s *Store) evictLock() (*os.File, error) {
	path := filepath.Join(s.dir, ".evict.lock")
	f, _, err := openCacheFile(path, os.O_RDWR|os.O_CREATE)
	if errors.Is(err, errNotCacheFile) {
		_ = os.Remove(path)
		f, _, err = openCacheFile(path, os.O_RDWR|os.O_CREATE)
	}
	if err != nil {
		return nil, err
	}
	if err := flock(f, unix.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// writeCacheFile writes a cache file's bytes (a variable: tests inject a full disk).
var writeCacheFile = func(f *os.File, data []byte) error {
	_, err := f.Write(data)
	return err
}

// discard removes a download's temporary file.
func discard(tmp *os.File) {
	if tmp != nil {
		_ = os.Remove(tmp.Name())
		Unlock(tmp)
	}
}

// diskError is a failure of the cache's disk, naming the directory; a full disk says what
// to do about it.
func (s *Store) diskError(what string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %s in %s: the disk is full (nothing cached was lost; free space or lower cache_limit): %w",
			ErrCache, what, s.dir, err)
	}
	return fmt.Errorf("%w: %s in %s: %w", ErrCache, what, s.dir, err)
}

// open leases the cached chunk at path, of n bytes and identity id, or returns nil when it
// is not there, or not that chunk whole (then it is deleted: see intact).
func (s *Store) open(path string, n int64, id Identity, check bool) *chunk {
	f, err := LockFile(path, unix.LOCK_SH)
	if err != nil {
		dropCacheFile(path, err)
		return nil
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Nlink == 0 { // evicted before our lock
		Unlock(f)
		return nil
	}
	if !s.intact(f, &st, n, id, check) {
		s.forgetID(idOf(&st))
		if names(path, st) {
			_ = os.Remove(path)
		}
		Unlock(f)
		return nil
	}
	if now := time.Now(); now.Sub(time.Unix(st.Mtim.Unix())) > time.Second {
		_ = os.Chtimes(path, now, now) // recency for LRU eviction
	}
	return &chunk{f: f}
}

// intact reports whether a chunk file is the chunk of n bytes and identity id: its size,
// and its seal, read at each open (a file planted, another chunk's copy, one left by an
// older layout or a damaged seal is not), then, with check, the CRC-32 of its bytes once
// per process.
func (s *Store) intact(f *os.File, st *unix.Stat_t, n int64, id Identity, check bool) bool {
	if st.Size != n+sealSize {
		return false
	}
	var tail [sealSize]byte
	if _, err := f.ReadAt(tail[:], n); err != nil {
		return false
	}
	sum, ok := sealed(tail[:], id)
	if !ok || !check {
		return ok
	}
	fid := idOf(st)
	s.mu.Lock()
	done := s.verified[fid]
	s.mu.Unlock()
	if done {
		return true
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, 0); err != nil || crc32.ChecksumIEEE(buf) != sum {
		return false
	}
	s.mu.Lock()
	s.verified[fid] = true
	s.mu.Unlock()
	return true
}

// forget deletes the cached chunk called name (found damaged by a sample's CRC-32).
func (s *Store) forget(name string) {
	path := filepath.Join(s.dir, name)
	var st unix.Stat_t
	if unix.Lstat(path, &st) == nil {
		s.forgetID(idOf(&st))
	}
	_ = os.Remove(path)
}

// forgetID drops a file from the checked ones: its inode may come back with other bytes.
func (s *Store) forgetID(id fileID) {
	s.mu.Lock()
	delete(s.verified, id)
	s.mu.Unlock()
}

// readAhead asks the kernel to read the cached chunk called name into the page cache
// (POSIX_FADV_WILLNEED queues the read and returns); false when it is not cached (it may
// still be evicted later).
func (s *Store) readAhead(name string) bool {
	path := filepath.Join(s.dir, name)
	f, _, err := openCacheFile(path, os.O_RDONLY)
	if err != nil {
		dropCacheFile(path, err)
		return false
	}
	defer f.Close()
	willNeed(f)
	return true
}
