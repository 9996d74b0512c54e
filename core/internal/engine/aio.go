package engine

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel ABI of Linux AIO (include/uapi/linux/aio_abi.h), little-endian layout.
const aioCmdPread = 0

type aioIOCB struct {
	data      uint64
	key       uint32
	rwFlags   uint32
	opcode    uint16
	reqprio   int16
	fd        uint32
	buf       uint64
	nbytes    uint64
	offset    int64
	reserved2 uint64
	flags     uint32
	resfd     uint32
}

type aioEvent struct {
	data, obj uint64
	res, res2 int64
}

// newAIOEngine uses Linux AIO for O_DIRECT fds only: on buffered fds the kernel completes
// AIO reads synchronously inside io_submit, one at a time, so the pread pool serves those.
func newAIOEngine() (Engine, error) {
	pool, err := newQueuePool(8, func() (queue, error) { return newAIOContext(depth) })
	if err != nil {
		return nil, err
	}
	return &batchEngine{kind: "aio", buffered: newPreadPool(depth), direct: pool}, nil
}

// aioContext is one AIO context with room for depth reads in flight.
type aioContext struct {
	ctx    uint64
	depth  int
	iocbs  []aioIOCB
	ptrs   []*aioIOCB
	events []aioEvent
	broken error      // io_getevents failed with reads in flight
	pinned []readSpan // their buffers, kept alive for the kernel
}

func newAIOContext(depth int) (*aioContext, error) {
	c := &aioContext{
		depth: depth, iocbs: make([]aioIOCB, depth), ptrs: make([]*aioIOCB, depth), events: make([]aioEvent, depth),
	}
	if _, _, errno := unix.Syscall(unix.SYS_IO_SETUP, uintptr(depth), uintptr(unsafe.Pointer(&c.ctx)), 0); errno != 0 {
		return nil, fmt.Errorf("io_setup: %w", errno)
	}
	return c, nil
}

func (c *aioContext) close() error {
	if _, _, errno := unix.Syscall(unix.SYS_IO_DESTROY, uintptr(c.ctx), 0, 0); errno != 0 {
		return fmt.Errorf("io_destroy: %w", errno)
	}
	return nil
}

// run performs spans with up to depth reads in flight and returns only once the kernel
// is done with every buffer it was given. The kernel copies each iocb at submission, so
// the iocb array is reused at once; only the data buffers must outlive the reads.
func (c *aioContext) run(spans []readSpan) error {
	if c.broken != nil {
		return c.broken
	}
	q := newSpanQueue(spans)
	inFlight := 0
	for q.more() || inFlight > 0 {
		batch := 0
		for q.more() && inFlight+batch < c.depth {
			i, fd, off, b := q.pop()
			c.iocbs[batch] = aioIOCB{
				data: uint64(i), opcode: aioCmdPread, fd: uint32(fd),
				buf: uint64(uintptr(unsafe.Pointer(&b[0]))), nbytes: uint64(len(b)), offset: off,
			}
			c.ptrs[batch] = &c.iocbs[batch]
			batch++
		}
		if batch > 0 {
			n, err := c.submit(batch)
			for k := batch - 1; k >= n; k-- { // not taken: back on the list, in order
				q.unpop(int32(c.iocbs[k].data))
			}
			if err != nil {
				q.fail(int32(c.iocbs[n].data), "io_submit", err)
			}
			inFlight += n
		}
		if inFlight == 0 {
			continue
		}
		n, err := c.getEvents()
		if err != nil {
			// The kernel may still write into buffers it was given: keep them alive with
			// the context, which refuses all further work.
			c.broken, c.pinned = err, spans
			return err
		}
		inFlight -= n
		for _, ev := range c.events[:n] {
			q.complete(int32(ev.data), "aio", ev.res)
		}
	}
	runtime.KeepAlive(spans)
	return q.err
}

// submit hands the first batch iocbs to the kernel and says how many it took. A full
// queue (EAGAIN) is not an error: the caller reaps and resubmits.
func (c *aioContext) submit(batch int) (int, error) {
	for {
		n, _, errno := unix.Syscall(unix.SYS_IO_SUBMIT, uintptr(c.ctx), uintptr(batch), uintptr(unsafe.Pointer(&c.ptrs[0])))
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			runtime.Gosched()
			return 0, nil
		}
		return 0, errno
	}
}

func (c *aioContext) getEvents() (int, error) {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_GETEVENTS, uintptr(c.ctx), 1, uintptr(len(c.events)),
			uintptr(unsafe.Pointer(&c.events[0])), 0, 0)
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, fmt.Errorf("io_getevents: %w", errno)
	}
}
