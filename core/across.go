package core

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// jointFrom is the fewest samples read as one batch across readers: a batch checks a page's
// residency first (a system call, see resident), where a lone sample per reader is copied
// from its mapping at once (fetchOne), so a datapoint's few fields are read reader by reader.
const jointFrom = 8

// jointResident counts the batches read across readers in a row found in the page cache
// (see resident), for all such batches of the process: the reader that reads one (its
// driver) changes from batch to batch in a mixture of many members, so that its own count
// would seldom reach warmStreak, and every batch would pay probeCount probes.
var jointResident atomic.Uint64

// ReadAcross reads sample indices[k] of readers[k] for every k back to back into dst, and
// sets sizes[k] to each one's size, as each reader's ReadBatch would read and check it: a
// batch gathered from many readers (a mixture's members, a dataset's shards) in one call.
// When dst is too small it returns an error wrapping io.ErrShortBuffer with every size
// filled and nothing read.
//
// From jointFrom samples on, local readers that serve their samples from their mappings or
// the engine alike (not remote, not direct, within the mapping budget) are read as one
// batch: a sample costs what it costs in any batch, where a batch of one per reader would pay a batch's setup
// per sample (a mixture of a thousand members: most of a batch's samples come from
// different readers). Otherwise each run of one reader is read by its own ReadBatch.
func ReadAcross(readers []*Reader, indices []uint64, dst []byte, sizes []uint64) error {
	n := len(indices)
	if len(readers) != n || len(sizes) < n {
		return fmt.Errorf("%w: %d readers and %d sizes for %d indices", ErrInvalid, len(readers), len(sizes), n)
	}
	// Each reader is held once: a second read lock taken while a Close waits would wait
	// forever.
	sets := readerSets.Get().(*readerSet)
	distinct := sets.distinct(readers)
	acquired := 0
	defer func() {
		for _, r := range distinct[:acquired] {
			r.mu.RUnlock()
		}
		clear(distinct)
		if n <= maxPooledItems { // an idle set keeps no more than a pooled batch
			readerSets.Put(sets)
		}
	}()
	joint := true
	var driver *Reader // a reader that checks data when any does: it checks the batch
	for _, r := range distinct {
		if err := r.acquire(); err != nil {
			return err
		}
		acquired++
		joint = joint && !r.remote && !r.opts.Direct && !r.window.streamData
		if driver == nil || (r.opts.CheckData && !driver.opts.CheckData) {
			driver = r
		}
	}
	if n == 0 {
		return nil
	}
	if !joint || n < jointFrom {
		return readRuns(readers, indices, dst, sizes)
	}
	b := getBatch(n)
	defer putBatch(b)
	b.streak = &jointResident
	var cur *batchItem
	return withFaultGuard(faultAt(&cur, readers[0].files[0].path), func() error {
		for k, index := range indices {
			var err error
			if b.items[k], err = readers[k].itemAt(index); err != nil {
				return err
			}
		}
		total, err := driver.layOut(b, sizes, dst, &cur)
		if err != nil {
			return err
		}
		for k := range b.items {
			b.items[k].checked = !readers[k].opts.CheckData // the driver checks the others' samples
		}
		return driver.readInto(b, dst[:total], &cur)
	})
}

// readRuns reads each run of one reader with its ReadBatch, after sizing them all (a short
// buffer then fails before anything is read, every size filled). The readers are held.
func readRuns(readers []*Reader, indices []uint64, dst []byte, sizes []uint64) error {
	var total uint64
	err := forRuns(readers, func(lo, hi int) error {
		if err := readers[lo].sizesHeld(indices[lo:hi], sizes[lo:hi]); err != nil {
			return err
		}
		for _, size := range sizes[lo:hi] {
			total += size
		}
		return nil
	})
	if err != nil {
		return err
	}
	if total > uint64(len(dst)) {
		return shortBuffer(total, len(dst))
	}
	var at uint64
	return forRuns(readers, func(lo, hi int) error {
		r := readers[lo]
		var cur *batchItem
		if err := withFaultGuard(faultAt(&cur, r.files[0].path), func() error {
			return r.readBatch(indices[lo:hi], dst[at:], sizes[lo:hi], &cur)
		}); err != nil {
			return err
		}
		for _, size := range sizes[lo:hi] {
			at += size
		}
		return nil
	})
}

// forRuns calls fn with the bounds of each run of equal readers, in order.
func forRuns(readers []*Reader, fn func(lo, hi int) error) error {
	for lo := 0; lo < len(readers); {
		hi := lo + 1
		for hi < len(readers) && readers[hi] == readers[lo] {
			hi++
		}
		if err := fn(lo, hi); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// readerSet finds the distinct readers of a batch; readerSets recycles them, as allocating
// their tables for every batch of a mixture cost a tenth of its read.
type readerSet struct {
	table []*Reader // open addressing on the pointers, empty between uses
	out   []*Reader
}

var readerSets = sync.Pool{New: func() any { return new(readerSet) }}

// distinct returns each reader of readers once, in the order first met, in a slice that
// is the set's own until it is put back (a sort of a few hundred pointers cost a third of a
// batch's read).
func (s *readerSet) distinct(readers []*Reader) []*Reader {
	size := 8
	for size < 2*len(readers) {
		size *= 2
	}
	if len(s.table) < size {
		s.table = make([]*Reader, size)
	}
	table := s.table[:size]
	out := s.out[:0]
	for _, r := range readers {
		h := uint64(uintptr(unsafe.Pointer(r))) * 0x9E3779B97F4A7C15 >> 32
		for i := int(h) & (size - 1); ; i = (i + 1) & (size - 1) {
			if table[i] == r {
				break
			}
			if table[i] == nil {
				table[i] = r
				out = append(out, r)
				break
			}
		}
	}
	clear(table)
	s.out = out
	return out
}
