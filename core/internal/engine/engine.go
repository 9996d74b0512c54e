// Package engine performs batches of positioned reads on Linux with many of them in
// flight: io_uring over raw system calls, Linux AIO for O_DIRECT descriptors, or a pool of
// goroutines calling pread, whichever the kernel (and any seccomp profile) allows, or the
// one named by $FFRECORD_ENGINE.
//
// Before a buffered batch reaches a queue, each read is tried on the calling thread with
// preadv2(RWF_NOWAIT), which succeeds only from the page cache: a warm batch costs one
// plain system call per read. Reads on O_DIRECT descriptors are rounded out to the
// device's alignment (statx STATX_DIOALIGN) through pooled, page-aligned bounce buffers,
// and neighbouring reads that share blocks are read once. Reads over MaxChunk bytes are
// split; short reads are resubmitted.
//
// The package knows nothing of the file format: it fills buffers from file offsets. A
// read that hits end of file is an error wrapping io.ErrUnexpectedEOF, which the caller
// turns into its own error with file and sample context.
package engine

// Request is one positioned read that must fill Buf completely from offset Off of the
// file open as FD.
type Request struct {
	FD  int
	Off int64
	Buf []byte
}

// Engine performs many positioned reads with as many in flight as the device rewards.
// Implementations are safe for concurrent use.
type Engine interface {
	// Read completes every request. A read that hits end of file before filling its
	// buffer yields an error wrapping io.ErrUnexpectedEOF; any other failure, the OS
	// error. When direct is true, the descriptors were opened with O_DIRECT and the
	// engine itself rounds each request out to the device alignment.
	Read(reqs []Request, direct bool) error
	// Name says which implementation this is ("io_uring", "aio", "pread").
	Name() string
	Close() error
}
