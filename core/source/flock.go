package source

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// The cache's processes coordinate with flock(2): a chunk in use holds a shared lock on its
// file, a download an exclusive one on its temporary file and on the chunk's lock file,
// eviction an exclusive one on .evict.lock. A flock belongs to the open file description,
// and a process forked while one is held (a DataLoader worker started by fork while a
// download-ahead goroutine downloads) shares that description without knowing it: had the
// lock been dropped by closing the file, it would live on in the child until the child
// exited, and every process waiting for it (the child itself too) would hang. So a lock is
// always dropped with LOCK_UN, which releases it for every holder of the description.
//
// A chunk's (or a header entry's) lock file exists only while someone holds or waits for
// it (a Lock), so that the cache holds no lock file per chunk it ever downloaded: its
// holder deletes it before dropping the lock, and a process that got the lock of a file
// deleted (or replaced) meanwhile finds so, by comparing the file it locked with what the
// path names now, and tries again. Whoever holds the lock of the file the path names is
// alone in doing so, whatever was deleted before.

// LockFile opens the existing cache file at path (never through a symlink, never waiting
// on a FIFO: errNotCacheFile) and flocks it (how: LOCK_SH or LOCK_EX), waiting for the
// lock. Unlock drops it.
func LockFile(path string, how int) (*os.File, error) {
	f, _, err := openCacheFile(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	if err := flock(f, how); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// flock takes a flock on f (how: LOCK_SH or LOCK_EX, perhaps LOCK_NB), waiting through
// interruptions.
func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}

// tryLock takes an exclusive flock on an open file without waiting.
func tryLock(f *os.File) bool {
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
}

// Unlock drops f's flock, if it holds one, for every process sharing its open file
// description, then closes f.
func Unlock(f *os.File) {
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	_ = f.Close()
}

// A Lock is an exclusive flock on a lock file that exists while it is held (see above).
type Lock struct {
	f    *os.File
	path string
}

// specialAttempts bounds how often Acquire finds something else than a lock file (a FIFO,
// a symlink) in its lock file's place, deletes it and finds another there again.
const specialAttempts = 100

// Acquire takes the lock of path, creating its lock file, waiting while another process
// holds it. Each time the file it locked turns out deleted meanwhile, another process held
// the lock and let it go, so trying again always follows progress: it is not bounded.
func Acquire(path string) (*Lock, error) {
	for special := 0; special < specialAttempts; {
		f, st, err := openCacheFile(path, os.O_RDWR|os.O_CREATE)
		if errors.Is(err, errNotCacheFile) {
			_ = os.Remove(path) // nobody can hold a lock on it: ours are regular files
			special++
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := flock(f, unix.LOCK_EX); err != nil {
			_ = f.Close()
			return nil, err
		}
		if names(path, st) {
			return &Lock{f: f, path: path}, nil
		}
		Unlock(f) // deleted by its holder while we waited: the lock is another file's now
	}
	return nil, fmt.Errorf("%s: %w in the lock file's place, again and again", path, errNotCacheFile)
}

// Release deletes the lock file and drops the lock: a process waiting for it finds its
// file deleted, and takes the lock of a new one.
func (l *Lock) Release() {
	_ = os.Remove(l.path)
	Unlock(l.f)
}

// names reports whether path names the file of status st.
func names(path string, st unix.Stat_t) bool {
	var now unix.Stat_t
	return unix.Lstat(path, &now) == nil && now.Dev == st.Dev && now.Ino == st.Ino
}

// sweepLock deletes the lock file at path when nobody holds it (left by a process that died
// holding it, or by an older layout that kept lock files), as its holder would have.
func sweepLock(path string) {
	f, st, err := openCacheFile(path, os.O_RDONLY)
	if err != nil {
		dropCacheFile(path, err)
		return
	}
	if tryLock(f) && names(path, st) {
		_ = os.Remove(path)
	}
	Unlock(f)
}
