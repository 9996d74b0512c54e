package engine

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel ABI of io_uring (include/uapi/linux/io_uring.h), the parts used here.
const (
	uringOpNop  = 0
	uringOpRead = 22

	uringEnterGetEvents = 1 << 0
	uringFeatSingleMmap = 1 << 0

	uringOffSQRing = 0
	uringOffCQRing = 0x8000000
	uringOffSQEs   = 0x10000000

	uringRegisterProbe = 8
	uringOpSupported   = 1 << 0
)

type uringSQOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type uringCQOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  uringSQOffsets
	cqOff                                                                  uringCQOffsets
}

type uringSQE struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	rwFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFDIn  int32
	addr3       uint64
	_           uint64
}

type uringCQE struct {
	userData uint64
	res      int32
	flags    uint32
}

// uringProbe is struct io_uring_probe with room for every opcode.
type uringProbe struct {
	lastOp, opsLen uint8
	_              uint16
	_              [3]uint32
	ops            [256]struct {
		op, _ uint8
		flags uint16
		_     uint32
	}
}

// uring is one io_uring instance with its rings mapped into our memory.
type uring struct {
	fd       int
	maps     [][]byte
	entries  uint32
	sqHead   *uint32 // advanced by the kernel
	sqTail   *uint32 // advanced by us
	sqMask   uint32
	sqes     []uringSQE
	cqHead   *uint32 // advanced by us
	cqTail   *uint32 // advanced by the kernel
	cqMask   uint32
	cqes     []uringCQE
	inFlight uint32     // SQEs pushed and not yet reaped
	broken   error      // io_uring_enter failed with reads in flight
	pinned   []readSpan // their buffers, kept alive for the kernel
}

func newUringEngine() (Engine, error) {
	pool, err := newQueuePool(8, func() (queue, error) { return newUring(depth) })
	if err != nil {
		return nil, err
	}
	return &batchEngine{kind: "io_uring", buffered: pool, direct: pool}, nil
}

func newUring(entries uint32) (_ *uring, err error) {
	var p uringParams
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &uring{fd: int(fd), entries: p.sqEntries}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(uringCQE{})))
	if p.features&uringFeatSingleMmap != 0 {
		sqSize = max(sqSize, cqSize)
	}
	sq, err := r.mmap(uringOffSQRing, sqSize)
	if err != nil {
		return nil, err
	}
	cq := sq
	if p.features&uringFeatSingleMmap == 0 {
		if cq, err = r.mmap(uringOffCQRing, cqSize); err != nil {
			return nil, err
		}
	}
	sqeMem, err := r.mmap(uringOffSQEs, int(p.sqEntries)*int(unsafe.Sizeof(uringSQE{})))
	if err != nil {
		return nil, err
	}
	r.sqHead = ringWord(sq, p.sqOff.head)
	r.sqTail = ringWord(sq, p.sqOff.tail)
	r.sqMask = *ringWord(sq, p.sqOff.ringMask)
	r.cqHead = ringWord(cq, p.cqOff.head)
	r.cqTail = ringWord(cq, p.cqOff.tail)
	r.cqMask = *ringWord(cq, p.cqOff.ringMask)
	r.sqes = unsafe.Slice((*uringSQE)(unsafe.Pointer(&sqeMem[0])), p.sqEntries)
	r.cqes = unsafe.Slice((*uringCQE)(unsafe.Pointer(&cq[p.cqOff.cqes])), p.cqEntries)
	// Slot i of the indirection array always names SQE i: SQEs are used in ring order.
	array := unsafe.Slice(ringWord(sq, p.sqOff.array), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	if err := r.checkRead(); err != nil {
		return nil, err
	}
	return r, nil
}

func ringWord(m []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&m[off])) }

func (r *uring) mmap(off int64, size int) ([]byte, error) {
	m, err := unix.Mmap(r.fd, off, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("io_uring mmap: %w", err)
	}
	r.maps = append(r.maps, m)
	return m, nil
}

// checkRead makes sure the kernel knows IORING_OP_READ and that io_uring_enter is
// allowed (a seccomp profile may permit setup and refuse enter).
func (r *uring) checkRead() error {
	var probe uringProbe
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), uringRegisterProbe,
		uintptr(unsafe.Pointer(&probe)), uintptr(len(probe.ops)), 0, 0)
	if errno != 0 {
		return fmt.Errorf("io_uring probe: %w", errno)
	}
	if probe.lastOp < uringOpRead || probe.ops[uringOpRead].flags&uringOpSupported == 0 {
		return fmt.Errorf("io_uring: kernel lacks IORING_OP_READ: %w", unix.ENOSYS)
	}
	r.push(uringSQE{opcode: uringOpNop})
	if err := r.enter(1, 1); err != nil {
		return err
	}
	r.reap(func(uringCQE) {})
	return nil
}

func (r *uring) close() error {
	for _, m := range r.maps {
		unix.Munmap(m)
	}
	return unix.Close(r.fd)
}

// push queues one SQE; the caller keeps inFlight below the ring size.
func (r *uring) push(sqe uringSQE) {
	tail := *r.sqTail
	r.sqes[tail&r.sqMask] = sqe
	atomic.StoreUint32(r.sqTail, tail+1) // publishes the SQE to the kernel
	r.inFlight++
}

// enter submits what is queued and waits for at least wait completions.
func (r *uring) enter(submit, wait uint32) error {
	for {
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(submit),
			uintptr(wait), uringEnterGetEvents, 0, 0)
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			// Nothing was submitted (the kernel reports a partial submission as success).
		case unix.EAGAIN, unix.EBUSY:
			if r.completed() > 0 {
				return nil // make room by reaping first
			}
			runtime.Gosched()
		default:
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
		submit = r.unsubmitted()
	}
}

func (r *uring) unsubmitted() uint32 { return *r.sqTail - atomic.LoadUint32(r.sqHead) }

func (r *uring) completed() uint32 { return atomic.LoadUint32(r.cqTail) - *r.cqHead }

// reap hands every available completion to handle.
func (r *uring) reap(handle func(uringCQE)) {
	head, tail := *r.cqHead, atomic.LoadUint32(r.cqTail)
	for ; head != tail; head++ {
		cqe := r.cqes[head&r.cqMask]
		r.inFlight--
		handle(cqe)
	}
	atomic.StoreUint32(r.cqHead, head) // hands the slots back to the kernel
}

// run performs spans with up to the ring size in flight. Whatever happens it returns only
// once the kernel is done with every buffer it was given.
func (r *uring) run(spans []readSpan) error {
	if r.broken != nil {
		return r.broken
	}
	q := newSpanQueue(spans)
	for q.more() || r.inFlight > 0 {
		for q.more() && r.inFlight < r.entries {
			i, fd, off, b := q.pop()
			r.push(uringSQE{
				opcode: uringOpRead, fd: int32(fd), off: uint64(off),
				addr: uint64(uintptr(unsafe.Pointer(&b[0]))), len: uint32(len(b)), userData: uint64(i),
			})
		}
		if err := r.enter(r.unsubmitted(), 1); err != nil {
			// The kernel may still write into buffers it was given: keep them alive with
			// the ring, which refuses all further work.
			r.broken, r.pinned = err, spans
			return err
		}
		r.reap(func(c uringCQE) { q.complete(int32(c.userData), "io_uring", int64(c.res)) })
	}
	runtime.KeepAlive(spans)
	return q.err
}
