package core

import (
	"io/fs"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// FileIdentity names one version of a file: any write, truncation, replacement or
// metadata change gives it another identity (the inode's change time moves on each, and
// no system call sets it back).
type FileIdentity struct {
	Dev, Ino, Size uint64
	MtimeNs        int64 // modification time, nanoseconds since the epoch
	CtimeNs        int64 // inode change time, nanoseconds since the epoch
}

// identityOf is the identity of the file open as fd.
func identityOf(fd int, path string) (FileIdentity, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return FileIdentity{}, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return FileIdentity{
		Dev: st.Dev, Ino: st.Ino, Size: uint64(st.Size),
		MtimeNs: st.Mtim.Nano(), CtimeNs: st.Ctim.Nano(),
	}, nil
}

// settledAge is how long before a verification a file must have last changed for the
// verification to vouch for its identity. File times come from a clock that advances in
// ticks (milliseconds): a change in the same tick as the verification could leave the
// times as they were, but a change after a tick of this age cannot.
const settledAge = 200 * time.Millisecond

// maxVerified bounds the process-wide record; past it the record starts afresh.
const maxVerified = 1 << 16

// verifiedFiles records the identities of files whose metadata this process has checked
// (checksum and offsets, as ReaderOptions.CheckData asks at Open): opening one of them
// again, unchanged, need not read its whole header again.
var verifiedFiles = struct {
	sync.Mutex
	ids map[FileIdentity]struct{}
}{ids: map[FileIdentity]struct{}{}}

// alreadyVerified reports whether the metadata of the file with identity id was checked
// by this process, or by the one that handed over vouched.
func alreadyVerified(id FileIdentity, vouched []FileIdentity) bool {
	for _, v := range vouched {
		if v == id {
			return true
		}
	}
	verifiedFiles.Lock()
	defer verifiedFiles.Unlock()
	_, ok := verifiedFiles.ids[id]
	return ok
}

// noteVerified records that the metadata of the file with identity id checked out in a
// verification begun at start, and reports whether that vouches for the identity (the file
// had settled before the check began).
func noteVerified(id FileIdentity, start time.Time) bool {
	if time.Unix(0, max(id.MtimeNs, id.CtimeNs)).After(start.Add(-settledAge)) {
		return false
	}
	verifiedFiles.Lock()
	defer verifiedFiles.Unlock()
	if len(verifiedFiles.ids) >= maxVerified {
		clear(verifiedFiles.ids)
	}
	verifiedFiles.ids[id] = struct{}{}
	return true
}

// Verified is the identity of every file of the dataset whose metadata was checked at
// Open (ReaderOptions.CheckData), or vouched for, and had not changed since: another
// process opening the same files with ReaderOptions.Verified set to it skips reading
// their headers again, as long as they stay unchanged.
func (r *Reader) Verified() []FileIdentity {
	var ids []FileIdentity
	for _, f := range r.files {
		if f.verified != nil {
			ids = append(ids, *f.verified)
		}
	}
	return ids
}
