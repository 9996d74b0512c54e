package core

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Files without a descriptor (ReaderOptions.NoDescriptors). A mixture of a thousand
// datasets, each a file per field, opens thousands of files; a descriptor each would
// exceed a process's RLIMIT_NOFILE (often 1024, or 256 in a container), and closing and
// reopening files to stay under it costs far more than the reads. Every local file is
// mapped whole already, and a mapping keeps its inode alive without a descriptor: a file
// replaced by rename goes on reading the version opened, and one truncated meanwhile faults,
// which withFaultGuard turns into ErrCorrupt as for any mapped read. So such a file closes
// its descriptor after the open and the header checks, and every read of it copies from the
// mapping: batches (fetch, readCold), lone samples (fetchOne), Verify (preadFull), and
// Prefetch advises the mapping (MADV_WILLNEED) instead of the descriptor.
//
// Only files the mapping can serve within mappedBudget give it up: a reader in Direct mode
// reads with O_DIRECT, a reader past the budget streams sample data with system calls
// (mapped.go), a remote file has no descriptor to give. Files give up their descriptors
// in the order they are opened while the sizes of those that did fit in mappedBudget; the
// rest keep theirs, so that what is read through the mappings stays within the budget.

// dropDescriptor closes f's descriptor when f is a local file and mappedOnly (the bytes of
// the reader's files that closed theirs) has room for it within mappedBudget.
func (f *dataFile) dropDescriptor(mappedOnly *atomic.Uint64) {
	if f.remote != nil || !f.fileMapped || f.fd < 0 {
		return
	}
	if mappedOnly.Add(f.size) > mappedBudget {
		mappedOnly.Add(-f.size)
		return
	}
	_ = unix.Close(f.fd)
	f.fd = -1
}

// mappedOnly reports whether f is read from its mapping alone, having no descriptor.
func (f *dataFile) mappedOnly() bool {
	return f.fd < 0 && f.remote == nil
}

// adviseWillNeed starts reading bytes [off, end) of f into the page cache and returns
// without waiting for them: through the descriptor, or the mapping when f has none.
func (f *dataFile) adviseWillNeed(off, end uint64) {
	if !f.mappedOnly() {
		_ = unix.Fadvise(f.fd, int64(off), int64(end-off), unix.FADV_WILLNEED)
		return
	}
	if off &^= pageSize - 1; off < end {
		_ = unix.Madvise(f.data[off:end], unix.MADV_WILLNEED)
	}
}

// Descriptors is the number of file descriptors the reader holds: one per local file,
// another per file read with O_DIRECT, none for files that gave theirs up
// (ReaderOptions.NoDescriptors) nor for remote files (whose connections the process shares),
// and none once the reader is closed.
func (r *Reader) Descriptors() uint64 {
	if r.acquire() != nil {
		return 0
	}
	defer r.mu.RUnlock()
	var n uint64
	for _, f := range r.files {
		if f.fd >= 0 {
			n++
		}
		if f.directFd >= 0 {
			n++
		}
	}
	return n
}
