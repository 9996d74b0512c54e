package source

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A process started while a lock is held shares the lock's open file description, as a
// DataLoader worker forked during a download does: Unlock must free the lock for everyone
// while that process lives on.
func TestUnlockFreesALockSharedWithAChildProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.chunk")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, how := range []int{unix.LOCK_EX, unix.LOCK_SH} {
		f, err := LockFile(path, how)
		if err != nil {
			t.Fatal(err)
		}
		child := exec.Command("sleep", "30")
		child.ExtraFiles = []*os.File{f}
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		other, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if tryLock(other) {
			t.Fatal("the lock was not held")
		}
		Unlock(f)
		if !tryLock(other) {
			t.Errorf("lock %d still held by the child process after Unlock", how)
		}
		Unlock(other)
		_ = child.Process.Kill()
		_ = child.Wait()
	}
}
