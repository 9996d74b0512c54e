package core

// readRequest is one positioned read that must fill buf completely from file offset off of
// the file open as fd.
type readRequest struct {
	fd  int
	off int64
	buf []byte
}

// engine performs many positioned reads with as many in flight as the device rewards.
// Implementations (io_uring, Linux AIO, a pread pool) are safe for concurrent use.
type engine interface {
	// readAll completes every request. A read that hits end of file before filling its
	// buffer yields an error wrapping io.ErrUnexpectedEOF; any other failure, the OS error.
	// When direct is true, fds were opened with O_DIRECT and the engine itself rounds each
	// request out to the device alignment through aligned bounce buffers.
	readAll(reqs []readRequest, direct bool) error
	// name says which implementation this is ("io_uring", "aio", "pread").
	name() string
	close() error
}
