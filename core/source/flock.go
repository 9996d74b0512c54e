package source

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// The cache's processes coordinate with flock(2): a chunk in use holds a shared lock on its
// file, a download an exclusive one on its temporary file and on the chunk's .lock file,
// eviction an exclusive one on .evict.lock. A flock belongs to the open file description,
// and a process forked while one is held (a DataLoader worker started by fork while a
// download-ahead goroutine downloads) shares that description without knowing it: had the
// lock been dropped by closing the file, it would live on in the child until the child
// exited, and every process waiting for it (the child itself too) would hang. So a lock is
// always dropped with LOCK_UN, which releases it for every holder of the description.

// LockFile opens path (creating it when it is a .lock file) and flocks it (how: LOCK_SH or
// LOCK_EX), waiting for the lock. Unlock drops it.
func LockFile(path string, how int) (*os.File, error) {
	flag := os.O_RDONLY
	if strings.HasSuffix(path, ".lock") {
		flag = os.O_RDWR | os.O_CREATE
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
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
