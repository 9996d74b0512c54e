package engine

import (
	"cmp"
	"math/bits"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Variables so that tests can shrink them.
var (
	// directPiece caps the wanted bytes of one O_DIRECT read; larger requests are split,
	// so a huge sample never needs a bounce buffer of its own size.
	directPiece = 4 << 20
	// directRound caps the bounce memory of one round of reads.
	directRound = 32 << 20
)

const (
	// bounceAlign aligns every bounce buffer: a page satisfies any device here.
	bounceAlign   = 4096
	minBounceBits = 16 // smallest pooled bounce buffer: 64 KiB
)

// directAlignment is the offset and memory alignment O_DIRECT reads of fd need:
// statx STATX_DIOALIGN where the kernel and file system report it, else a page.
func directAlignment(fd int) (offset, memory int64) {
	var st unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN|unix.STATX_DIO_READ_ALIGN, &st)
	if err != nil || st.Mask&unix.STATX_DIOALIGN == 0 || st.Dio_offset_align == 0 {
		return bounceAlign, bounceAlign
	}
	offset, memory = int64(st.Dio_offset_align), int64(st.Dio_mem_align)
	if st.Mask&unix.STATX_DIO_READ_ALIGN != 0 && st.Dio_read_offset_align != 0 {
		offset = int64(st.Dio_read_offset_align)
	}
	// Bounce buffers are page-aligned; no device asks for more than a page.
	return offset, min(max(memory, 1), bounceAlign)
}

// directPart is a piece of at most directPiece bytes of one request.
type directPart struct {
	dst []byte
	fd  int
	off int64
}

// directExtent is one aligned read serving every part whose blocks it covers, so that
// neighbouring samples in a batch share their blocks instead of reading them twice.
type directExtent struct {
	fd         int
	start, end int64 // aligned file range read
	wantEnd    int64 // end of the last wanted byte: the file may end after it
	align, mem int64
	parts      []directPart
}

// directExtents splits requests into parts and merges parts whose aligned ranges touch
// or overlap into extents of at most directPiece bytes (a lone part may exceed it by
// its rounding).
func directExtents(reqs []Request) []directExtent {
	var parts []directPart
	for _, r := range reqs {
		for done := 0; done < len(r.Buf); done += directPiece {
			n := min(len(r.Buf)-done, directPiece)
			parts = append(parts, directPart{dst: r.Buf[done : done+n], fd: r.FD, off: r.Off + int64(done)})
		}
	}
	slices.SortFunc(parts, func(a, b directPart) int {
		return cmp.Or(cmp.Compare(a.fd, b.fd), cmp.Compare(a.off, b.off))
	})
	type alignment struct{ offset, memory int64 }
	aligns := make(map[int]alignment)
	var extents []directExtent
	for i, p := range parts {
		a, ok := aligns[p.fd]
		if !ok {
			a.offset, a.memory = directAlignment(p.fd)
			aligns[p.fd] = a
		}
		wantEnd := p.off + int64(len(p.dst))
		start := p.off / a.offset * a.offset
		end := (wantEnd + a.offset - 1) / a.offset * a.offset
		if k := len(extents) - 1; k >= 0 {
			e := &extents[k]
			if e.fd == p.fd && start <= e.end && max(end, e.end)-e.start <= int64(directPiece) {
				e.end, e.wantEnd = max(end, e.end), max(wantEnd, e.wantEnd)
				e.parts = parts[i-len(e.parts) : i+1]
				continue
			}
		}
		extents = append(extents, directExtent{
			fd: p.fd, start: start, end: end, wantEnd: wantEnd, align: a.offset, mem: a.memory,
			parts: parts[i : i+1],
		})
	}
	return extents
}

// readDirect performs requests on O_DIRECT fds through aligned bounce buffers, in
// rounds of at most directRound bytes of bounce memory.
func readDirect(r spanReader, reqs []Request) error {
	extents := directExtents(reqs)
	for len(extents) > 0 {
		n, total := 0, 0
		for n < len(extents) {
			need := alignUp(total, int(extents[n].mem)) + int(extents[n].end-extents[n].start)
			if n > 0 && need > directRound {
				break
			}
			total = need
			n++
		}
		if err := readDirectRound(r, extents[:n], total); err != nil {
			return err
		}
		extents = extents[n:]
	}
	return nil
}

func readDirectRound(r spanReader, extents []directExtent, total int) error {
	bounce := getBounce(total)
	defer putBounce(bounce)
	spans := make([]readSpan, len(extents))
	at := 0
	for i, e := range extents {
		at = alignUp(at, int(e.mem))
		size := int(e.end - e.start)
		spans[i] = readSpan{
			fd: e.fd, off: e.start, buf: bounce[at : at+size : at+size],
			need: int(e.wantEnd - e.start), align: e.align,
		}
		at += size
	}
	if err := r.readSpans(spans); err != nil {
		return err
	}
	for i, e := range extents {
		for _, p := range e.parts {
			copy(p.dst, spans[i].buf[p.off-e.start:])
		}
	}
	return nil
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// bouncePools holds page-aligned buffers by power-of-two size class.
var bouncePools [64]sync.Pool

func bounceClass(n int) int {
	return max(bits.Len(uint(n-1)), minBounceBits)
}

// getBounce returns a page-aligned buffer of at least n bytes (length = its class size).
func getBounce(n int) []byte {
	c := bounceClass(n)
	if b, ok := bouncePools[c].Get().(*[]byte); ok {
		return *b
	}
	raw := make([]byte, 1<<c+bounceAlign)
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(raw))) & (bounceAlign - 1))
	return raw[skip : skip+1<<c : skip+1<<c]
}

func putBounce(b []byte) {
	bouncePools[bounceClass(len(b))].Put(&b)
}
