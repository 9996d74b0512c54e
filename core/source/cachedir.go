package source

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// A cache directory is used only when no other user can write into it: what it holds is
// served as the objects' bytes, and its seals (cachefile.go) are made by a process that
// knows the key, which an intruder knows as well as we do. So the directory and its chunks
// subdirectory must belong to this process's user and be writable by nobody else (no
// group or other write bit, sticky or not), as OpenSSH requires of ~/.ssh. Anything else
// is refused with a PermissionError naming the directory and the fix; a private directory
// is never picked behind the user's back, since every process of the node must find the
// same one. New directories are created 0700.

// untrustedDirError is a cache directory refused because another user could write into
// it (why says how). It is ErrCache, and EACCES on the directory (Python's
// PermissionError).
type untrustedDirError struct{ dir, why string }

func (e *untrustedDirError) Error() string {
	return fmt.Sprintf("%v: cache directory %s %s: another user could plant files there that readers would take "+
		"for cached data; give the cache a directory only you can write (chmod 700 %s), or another cache_dir",
		ErrCache, e.dir, e.why, e.dir)
}

func (e *untrustedDirError) Unwrap() []error {
	return []error{ErrCache, &fs.PathError{Op: "use", Path: e.dir, Err: syscall.EACCES}}
}

// makePrivateDir creates dir (with its parents) 0700 when it is missing, then checks that
// only this user can write into it; follow: dir may be a symlink to the directory (a
// cache_dir given by the user; the chunks subdirectory is the cache's own, never a link).
func makePrivateDir(dir string, follow bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w: cache directory %s: %w", ErrCache, dir, err)
	}
	var st unix.Stat_t
	stat := unix.Lstat
	if follow {
		stat = unix.Stat
	}
	if err := stat(dir, &st); err != nil {
		return fmt.Errorf("%w: cache directory %s: %w", ErrCache, dir, &fs.PathError{Op: "stat", Path: dir, Err: err})
	}
	uid := uint32(os.Geteuid())
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return &untrustedDirError{dir, "is not a directory but a symlink or another file"}
	case st.Uid != uid:
		return &untrustedDirError{dir, fmt.Sprintf("belongs to uid %d, not to this process's user (uid %d)", st.Uid, uid)}
	case st.Mode&0o002 != 0:
		return &untrustedDirError{dir, fmt.Sprintf("is writable by all users (mode %04o)", st.Mode&0o7777)}
	case st.Mode&0o020 != 0:
		return &untrustedDirError{dir, fmt.Sprintf("is writable by its group (mode %04o)", st.Mode&0o7777)}
	}
	return nil
}
