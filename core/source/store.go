package source

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/klauspost/crc32"
	"golang.org/x/sys/unix"
)

// A Store is a cache directory of chunks shared by every process of a node through the
// file system alone, so that nothing depends on a process staying alive:
//
//   - A chunk is the file chunks/KEY-OFF-LEN.chunk: its bytes, their CRC-32 and a magic
//     (trailer). It appears by rename, whole, or not at all.
//   - Downloading a chunk holds an exclusive flock on chunks/NAME.lock, so that one process
//     downloads it while the others wait and then read it. The kernel drops the lock of a
//     process that dies. Lock files (empty) are never deleted: deleting one that another
//     process has just opened would let two processes download the same chunk.
//   - The download is written to chunks/.tmp-LEN-*, itself held under an exclusive flock:
//     one found unlocked was left by a dead process, and is deleted.
//   - Reading a chunk holds a shared flock on it (as long as a reader keeps it mapped:
//     Cached's held chunks); eviction takes the exclusive lock without waiting, so a chunk
//     in use is never evicted.
//   - Space is reserved, and downloads renamed into place, under an exclusive flock on
//     chunks/.evict.lock: the chunks and the
//     downloads under way are counted, and the least recently used chunks not in use are
//     evicted until the new one fits the limit. When every chunk is in use, the new one is
//     served from memory without being cached: never a deadlock.
//   - Each process checks a chunk file's CRC-32 the first time it uses it (unless its
//     reader checks every sample's own CRC-32, which covers the same bytes); a damaged one
//     is deleted and downloaded again.
type Store struct {
	dir   string // the chunks directory
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

// trailerSize is the bytes after a chunk's data: its CRC-32 and the magic.
const trailerSize = 12

var trailerMagic = []byte("ffrchunk")

var (
	storesMu sync.Mutex
	stores   = map[string]*Store{}
)

// OpenStore returns the store of dir with a limit in bytes (0: none), shared by the readers
// of the process. A directory that cannot be created or written is an error now, not at
// the first read.
func OpenStore(dir string, limit int64) (*Store, error) {
	if limit < 0 {
		return nil, fmt.Errorf("%w: cache_limit %d is negative", ErrCacheLimit, limit)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	key := abs + "\x00" + strconv.FormatInt(limit, 10)
	storesMu.Lock()
	defer storesMu.Unlock()
	if s, ok := stores[key]; ok {
		return s, nil
	}
	s := &Store{dir: filepath.Join(abs, "chunks"), limit: limit, verified: map[fileID]bool{}}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: cache directory %s: %w", ErrCache, dir, err)
	}
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

// get returns the chunk called name, of n bytes, downloading it with fetch when it is not
// cached; a cached chunk file's CRC-32 is checked first when check is set. The chunk is
// leased until release.
func (s *Store) get(name string, n int64, check bool, fetch func([]byte) error, stats *Stats) (*chunk, error) {
	if c := s.cached(name, n, check, stats); c != nil {
		return c, nil
	}
	path := filepath.Join(s.dir, name)
	lock, err := LockFile(path+".lock", unix.LOCK_EX)
	if err != nil {
		return nil, s.diskError("locking a chunk", err)
	}
	defer Unlock(lock)
	if c := s.open(path, n, check); c != nil { // another process downloaded it meanwhile
		stats.Hits.Add(1)
		return c, nil
	}
	stats.Misses.Add(1)
	tmp, err := s.reserve(n, stats)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n+trailerSize)
	if err := fetch(buf[:n]); err != nil {
		discard(tmp)
		return nil, err
	}
	if tmp == nil { // no room: every cached chunk is in use
		stats.Bypassed.Add(1)
		return &chunk{mem: buf[:n]}, nil
	}
	le := crc32.ChecksumIEEE(buf[:n])
	buf[n], buf[n+1], buf[n+2], buf[n+3] = byte(le), byte(le>>8), byte(le>>16), byte(le>>24)
	copy(buf[n+4:], trailerMagic)
	if err := writeChunk(tmp, buf); err != nil {
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

// cached returns the chunk called name, of n bytes, leased, when it is cached (see get),
// else nil.
func (s *Store) cached(name string, n int64, check bool, stats *Stats) *chunk {
	c := s.open(filepath.Join(s.dir, name), n, check)
	if c != nil {
		stats.Hits.Add(1)
	}
	return c
}

// publish renames a finished download into place, under the eviction lock: a listing
// made under that lock sees the download or the chunk, never neither.
func (s *Store) publish(tmp *os.File, path string) error {
	lock, err := LockFile(filepath.Join(s.dir, ".evict.lock"), unix.LOCK_EX)
	if err != nil {
		return err
	}
	defer Unlock(lock)
	return os.Rename(tmp.Name(), path)
}

// writeChunk writes a chunk file's bytes (a variable: tests inject a full disk).
var writeChunk = func(f *os.File, data []byte) error {
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

// open leases the cached chunk at path, or returns nil when it is not there (or was
// damaged, and is now deleted: its size is wrong, or with check its CRC-32).
func (s *Store) open(path string, n int64, check bool) *chunk {
	f, err := LockFile(path, unix.LOCK_SH)
	if err != nil {
		return nil
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Nlink == 0 { // evicted before our lock
		Unlock(f)
		return nil
	}
	id := fileID{uint64(st.Dev), st.Ino, st.Size}
	if st.Size != n+trailerSize || (check && !s.check(f, id, n)) {
		s.forgetID(id)
		_ = os.Remove(path)
		Unlock(f)
		return nil
	}
	if now := time.Now(); now.Sub(time.Unix(st.Mtim.Unix())) > time.Second {
		_ = os.Chtimes(path, now, now) // recency for LRU eviction
	}
	return &chunk{f: f}
}

// check verifies a chunk file's CRC-32 once per process.
func (s *Store) check(f *os.File, id fileID, n int64) bool {
	s.mu.Lock()
	done := s.verified[id]
	s.mu.Unlock()
	if done {
		return true
	}
	buf := make([]byte, n+trailerSize)
	if _, err := f.ReadAt(buf, 0); err != nil {
		return false
	}
	sum := crc32.ChecksumIEEE(buf[:n])
	tail := buf[n:]
	stored := uint32(tail[0]) | uint32(tail[1])<<8 | uint32(tail[2])<<16 | uint32(tail[3])<<24
	if sum != stored || string(tail[4:]) != string(trailerMagic) {
		return false
	}
	s.mu.Lock()
	s.verified[id] = true
	s.mu.Unlock()
	return true
}

// forget deletes the cached chunk called name (found damaged by a sample's CRC-32).
func (s *Store) forget(name string) {
	path := filepath.Join(s.dir, name)
	var st unix.Stat_t
	if unix.Stat(path, &st) == nil {
		s.forgetID(fileID{uint64(st.Dev), st.Ino, st.Size})
	}
	_ = os.Remove(path)
}

// forgetID drops a file from the checked ones: its inode may come back with other bytes.
func (s *Store) forgetID(id fileID) {
	s.mu.Lock()
	delete(s.verified, id)
	s.mu.Unlock()
}

// cachedFile is a chunk file seen by reserve.
type cachedFile struct {
	name  string
	size  int64
	mtime time.Time
}

// reserve makes room for a chunk of n bytes and creates its download file, locked. It
// returns nil (and no error) when the limit cannot be met because every chunk is in use.
func (s *Store) reserve(n int64, stats *Stats) (*os.File, error) {
	lock, err := LockFile(filepath.Join(s.dir, ".evict.lock"), unix.LOCK_EX)
	if err != nil {
		return nil, s.diskError("locking the cache", err)
	}
	defer Unlock(lock)
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, s.diskError("listing the cache", err)
	}
	var used int64
	var chunks []cachedFile
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, ".tmp-"):
			used += s.liveDownload(name)
		case strings.HasSuffix(name, ".chunk"):
			if info, err := e.Info(); err == nil {
				used += info.Size()
				chunks = append(chunks, cachedFile{name, info.Size(), info.ModTime()})
			}
		}
	}
	need := n + trailerSize
	if s.limit > 0 && used+need > s.limit {
		slices.SortFunc(chunks, func(a, b cachedFile) int { return a.mtime.Compare(b.mtime) })
		for _, c := range chunks {
			if used+need <= s.limit {
				break
			}
			if s.evict(c.name) {
				used -= c.size
				stats.Evictions.Add(1)
			}
		}
		if used+need > s.limit {
			return nil, nil
		}
	}
	name := fmt.Sprintf(".tmp-%d-%d-%x", need, os.Getpid(), rand.Uint64())
	tmp, err := os.OpenFile(filepath.Join(s.dir, name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, s.diskError("creating a chunk", err)
	}
	if !tryLock(tmp) {
		discard(tmp)
		return nil, s.diskError("locking a new chunk", syscall.EWOULDBLOCK)
	}
	return tmp, nil
}

// liveDownload is the size a download under way will have; a download left by a dead
// process (its file unlocked) is deleted and counts nothing.
func (s *Store) liveDownload(name string) int64 {
	size, _ := strconv.ParseInt(strings.SplitN(strings.TrimPrefix(name, ".tmp-"), "-", 2)[0], 10, 64)
	path := filepath.Join(s.dir, name)
	f, err := os.Open(path)
	if err != nil {
		return 0 // failed, and removed by its writer
	}
	defer Unlock(f)
	if tryLock(f) {
		_ = os.Remove(path)
		return 0
	}
	return size
}

// evict deletes a chunk unless it is in use.
func (s *Store) evict(name string) bool {
	path := filepath.Join(s.dir, name)
	f, err := os.Open(path)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	defer Unlock(f)
	if !tryLock(f) {
		return false
	}
	return os.Remove(path) == nil
}

// readAhead asks the kernel to read the cached chunk called name into the page cache
// (POSIX_FADV_WILLNEED queues the read and returns); false when it is not cached (it may
// still be evicted later).
func (s *Store) readAhead(name string) bool {
	f, err := os.Open(filepath.Join(s.dir, name))
	if err != nil {
		return false
	}
	defer f.Close()
	willNeed(f)
	return true
}
