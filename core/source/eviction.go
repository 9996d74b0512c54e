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
	"syscall"
	"time"
)

// cachedFile is a chunk or entry seen by reserve: what evicting it frees, and when it was
// last used.
type cachedFile struct {
	path  string
	size  int64
	mtime time.Time
	chunk bool // evicted only when no reader leases it
}

// reserve makes room for a cache file of need bytes and creates its download file, locked.
// It returns nil (and no error) when the limit cannot be met because every chunk is in
// use.
func (s *Store) reserve(need int64, stats *Stats) (*os.File, error) {
	lock, err := s.evictLock()
	if err != nil {
		return nil, s.diskError("locking the cache", err)
	}
	defer Unlock(lock)
	used, files, err := s.census()
	if err != nil {
		return nil, s.diskError("listing the cache", err)
	}
	if s.limit > 0 && used+need > s.limit {
		slices.SortFunc(files, func(a, b cachedFile) int { return a.mtime.Compare(b.mtime) })
		for _, f := range files {
			if used+need <= s.limit {
				break
			}
			if s.evict(f) {
				used -= f.size
				if stats != nil {
					stats.Evictions.Add(1)
				}
			}
		}
		if used+need > s.limit {
			return nil, nil
		}
	}
	name := fmt.Sprintf(".tmp-%d-%d-%x", need, os.Getpid(), rand.Uint64())
	tmp, _, err := openCacheFile(filepath.Join(s.dir, name), os.O_RDWR|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return nil, s.diskError("creating a cache file", err)
	}
	if !tryLock(tmp) {
		discard(tmp)
		return nil, s.diskError("locking a new cache file", syscall.EWOULDBLOCK)
	}
	return tmp, nil
}

// census lists the cache (under the eviction lock): the bytes its chunks, entries and
// downloads under way take, and the chunks and entries that could be evicted. On the way
// it deletes what dead processes left (downloads, lock files) and what is no cache file.
func (s *Store) census() (used int64, files []cachedFile, err error) {
	for _, dir := range []string{s.dir, s.root} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return 0, nil, err
		}
		for _, e := range entries {
			name := e.Name()
			path := filepath.Join(dir, name)
			chunk := dir == s.dir && strings.HasSuffix(name, ".chunk")
			switch {
			case dir == s.dir && strings.HasPrefix(name, ".tmp-"):
				used += liveDownload(path)
			case strings.HasSuffix(name, ".lock") && name != ".evict.lock" &&
				(dir == s.dir || isEntryName(strings.TrimSuffix(name, ".lock"))):
				sweepLock(path)
			case chunk || dir == s.root && isEntryName(name):
				info, err := e.Info()
				if err != nil {
					continue // deleted meanwhile
				}
				if !info.Mode().IsRegular() {
					_ = os.Remove(path) // never opened: it would not be served either
					continue
				}
				used += info.Size()
				files = append(files, cachedFile{path, info.Size(), info.ModTime(), chunk})
			}
		}
	}
	return used, files, nil
}

// liveDownload is the size the download at path will have; a download left by a dead
// process (its file unlocked) is deleted and counts nothing.
func liveDownload(path string) int64 {
	size, _ := strconv.ParseInt(strings.SplitN(strings.TrimPrefix(filepath.Base(path), ".tmp-"), "-", 2)[0], 10, 64)
	f, _, err := openCacheFile(path, os.O_RDONLY)
	if err != nil {
		dropCacheFile(path, err)
		return 0 // failed, and removed by its writer
	}
	defer Unlock(f)
	if tryLock(f) {
		_ = os.Remove(path)
		return 0
	}
	return size
}

// evict deletes a cache file, unless it is a chunk in use.
func (s *Store) evict(c cachedFile) bool {
	if !c.chunk { // read whole at open: a reader with it open keeps its bytes
		err := os.Remove(c.path)
		return err == nil || errors.Is(err, fs.ErrNotExist)
	}
	f, st, err := openCacheFile(c.path, os.O_RDONLY)
	if err != nil {
		dropCacheFile(c.path, err)
		return errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotCacheFile)
	}
	defer Unlock(f)
	if !tryLock(f) {
		return false
	}
	s.forgetID(idOf(&st)) // its inode may come back as another chunk's
	return os.Remove(c.path) == nil
}
