package core

import "sync/atomic"

// Each file is mapped whole and shared, and warm batches of a small dataset are copied out
// of the mapping: a memory copy beats a system call per sample several times over for small
// samples (measured, 256 random 1 KiB samples: 115 µs copied from a populated mapping, 400 µs
// through preadv2, 540 µs through io_uring). But every page touched through a mapping stays
// in this process's page tables and resident set until unmapped: one shuffled pass over a
// dataset larger than memory would map all of it, in every loader worker, and dropping pages
// to bound that costs page faults on the next touch (790 µs per such batch). So a
// dataset whose sample data exceeds mappedBudget is read with system calls into the caller's
// buffer, never through the mapping, and the mapping then only serves the header. A header
// larger than the budget (over 5 million samples per 64 MiB) is bounded too: past the
// budget, its pages are dropped with MADV_DONTNEED (the page cache keeps them, the kernel
// frees the emptied page tables) and fault back in as needed.
var mappedBudget uint64 = 256 << 20

// faultAround is how much one read fault on a file mapping maps at once: the kernel maps
// the cached pages around the faulting one, 64 KiB by default.
const faultAround = 64 << 10

// headerTouch is what looking up one sample may map of a header: a block holding its
// offsets and one holding its checksum.
const headerTouch = 2 * faultAround

// mappedWindow is how a Reader bounds what its mappings put in this process's memory.
type mappedWindow struct {
	// streamData: sample data is read with system calls, not copied from the mappings.
	streamData bool
	// boundHeaders: header lookups are counted in touched, and headers dropped past the budget.
	boundHeaders bool
	touched      atomic.Uint64
}

// noteLookups records that n samples were looked up in the headers, and drops the mapped
// header pages of every file once the budget is spent. Another goroutine reading a header
// meanwhile is unaffected: a dropped page of a shared file mapping faults back in from the
// page cache with the same bytes.
func (r *Reader) noteLookups(n int) {
	r.window.noteHeaderBytes(uint64(n)*headerTouch, r.files)
}

// noteHeaderBytes records that bytes of the headers of files were mapped, and drops the
// mapped header pages of every file once the budget is spent.
func (w *mappedWindow) noteHeaderBytes(bytes uint64, files []*dataFile) {
	if !w.boundHeaders || w.touched.Add(bytes) < mappedBudget {
		return
	}
	w.touched.Store(0)
	for _, f := range files {
		f.release(0, f.header)
	}
}
