package core

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ffrecord/ffrecord/core/internal/engine"
)

// parallelBytes is the batch size from which copying and checking is split across
// goroutines: starting them costs ~20 µs (measured across cgo), the time to copy and
// check ~50 KB, so only batches well above that gain (measured on a shared 2-core machine:
// 256 random 1 KiB samples, ~100 µs on one thread, gained nothing from a second goroutine).
const parallelBytes = 1 << 20

// batchItem is one sample of a batch on its way from the file to the caller's buffer.
type batchItem struct {
	file        *dataFile
	local       uint64 // index in the file (base format)
	global      uint64 // index in the dataset
	off         uint64 // stored bytes [off, end) in the file
	end         uint64
	out         uint64 // where the sample starts in dst
	size        uint64 // its size as returned (the original size of a compressed sample)
	compression byte
	src         []byte // the stored bytes once they are in memory
	checked     bool   // src matched its CRC-32 already (a remote fetch checks each sample)
}

// inPlace reports whether the stored bytes can be read straight into the caller's buffer.
func (it *batchItem) inPlace() bool {
	return it.compression == compressionRaw && it.end-it.off == it.size
}

type batch struct {
	items []batchItem
	reqs  []engine.Request
	// streak counts the batches in a row found in the page cache (see resident): the
	// reader's own, unless set (ReadAcross: jointResident).
	streak *atomic.Uint64
}

// maxPooledItems bounds what an idle pooled batch keeps allocated.
const maxPooledItems = 1 << 16

var batchPool = sync.Pool{New: func() any { return new(batch) }}

func getBatch(n int) *batch {
	b := batchPool.Get().(*batch)
	if cap(b.items) < n {
		b.items = make([]batchItem, n)
	}
	b.items = b.items[:n]
	return b
}

func putBatch(b *batch) {
	if cap(b.items) > maxPooledItems {
		return
	}
	clear(b.items)
	clear(b.reqs)
	b.reqs = b.reqs[:0]
	b.streak = nil
	batchPool.Put(b)
}

// plan locates sample local of f and fills in everything but where it goes.
func (r *Reader) plan(it *batchItem, f *dataFile, local, fileStart uint64) error {
	// file and local first: a fault while reading the offsets names this sample.
	*it = batchItem{file: f, local: local, global: fileStart + local}
	off, end, err := f.span(local)
	if err != nil {
		return sampleError(err, it.global, local)
	}
	it.off, it.end, it.size, it.compression = off, end, end-off, compressionRaw
	if f.ext != nil {
		it.compression, it.size = f.ext.sampleCompression(local), f.ext.originalSize(local)
	}
	return nil
}

// ReadBatch reads samples indices[0..k) back to back into dst and sets sizes[k] to each
// one's size. When dst is too small for them all it returns an error wrapping
// io.ErrShortBuffer with sizes filled and nothing read.
func (r *Reader) ReadBatch(indices []uint64, dst []byte, sizes []uint64) error {
	if len(sizes) < len(indices) {
		return fmt.Errorf("%w: %d sizes for %d indices", ErrInvalid, len(sizes), len(indices))
	}
	if err := r.acquire(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	var cur *batchItem
	return withFaultGuard(faultAt(&cur, r.files[0].path), func() error {
		return r.readBatch(indices, dst, sizes, &cur)
	})
}

// readBatch is ReadBatch once the reader is acquired, inside the fault guard (cur tracks
// the item in hand).
func (r *Reader) readBatch(indices []uint64, dst []byte, sizes []uint64, cur **batchItem) error {
	b := getBatch(len(indices))
	defer putBatch(b)
	for k, index := range indices {
		var err error
		if b.items[k], err = r.itemAt(index); err != nil {
			return err
		}
	}
	total, err := r.layOut(b, sizes, dst, cur)
	if err != nil {
		return err
	}
	return r.readInto(b, dst[:total], cur)
}

// itemAt is the batch item of sample index of the dataset: its file and indices (layOut
// plans the rest).
func (r *Reader) itemAt(index uint64) (batchItem, error) {
	fk, local, err := r.locate(index)
	if err != nil {
		return batchItem{}, err
	}
	if fk == 0 {
		return batchItem{file: r.first, local: local, global: local}, nil
	}
	return batchItem{file: r.files[fk], local: local, global: r.starts[fk] + local}, nil
}

// layOut plans every item of b (its file and indices set) and places them back to back,
// setting sizes: the total, or an error wrapping io.ErrShortBuffer, with every size set and
// nothing read, when dst is too small for them.
func (r *Reader) layOut(b *batch, sizes []uint64, dst []byte, cur **batchItem) (uint64, error) {
	var total uint64
	for k := range b.items {
		it := &b.items[k]
		if k+headerLinesAhead < len(b.items) {
			r.loadHeaderLines(&b.items[k+headerLinesAhead])
		}
		*cur = it
		if err := r.plan(it, it.file, it.local, it.global-it.local); err != nil {
			return 0, err
		}
		it.out = total
		sizes[k] = it.size
		if total+it.size < total {
			return 0, errorf(it.file.path, int64(it.local), ErrCorrupt, "sample size %d overflows the batch", it.size)
		}
		total += it.size
	}
	if total > uint64(len(dst)) {
		return 0, shortBuffer(total, len(dst))
	}
	return total, nil
}

// shortBuffer is the error of a batch of total bytes for a buffer of have.
func shortBuffer(total uint64, have int) error {
	return fmt.Errorf("%w: %w: the batch needs %d bytes, the buffer has %d", io.ErrShortBuffer, ErrInvalid, total, have)
}

// fetch brings the stored bytes [off, end) of every planned item into memory and sets its
// src: in place in dst when inPlace, else wherever they can be read.
func (r *Reader) fetch(b *batch, dst []byte) error {
	if r.remote {
		return r.fetchRemote(b, dst)
	}
	r.noteLookups(len(b.items))
	if len(b.items) == 1 && !r.opts.Direct {
		return r.fetchOne(&b.items[0], dst)
	}
	if r.window.streamData && !r.opts.Direct {
		return r.fetchPastBudget(b, dst)
	}
	if r.opts.Direct || !r.resident(b) {
		return r.readCold(b, dst, r.opts.Direct)
	}
	for k := range b.items {
		it := &b.items[k]
		it.src = it.file.data[it.off:it.end]
	}
	return nil
}

// fetchPastBudget brings a batch of a dataset past the mapping budget into memory: the
// samples in warm admitted blocks are copied from the mapping, the others read with the
// engine (see warm_blocks.go); those of files without a descriptor, whose sizes the budget
// counts already, are left to readCold.
func (r *Reader) fetchPastBudget(b *batch, dst []byte) error {
	mapped := 0
	for k := range b.items {
		if it := &b.items[k]; !it.file.mappedOnly() && r.fromWarmBlock(it) {
			it.src = it.file.data[it.off:it.end]
			mapped++
		}
	}
	if mapped == len(b.items) {
		return nil
	}
	return r.readCold(b, dst, false)
}

// fetchOne brings a lone sample into memory. A single read blocks on at most one trip to
// the disk whichever way it goes, so there is nothing for the engine's queue to win: it is
// copied from the mapping (past the budget, only from a warm block: see warm_blocks.go),
// or read with one blocking system call on this thread.
func (r *Reader) fetchOne(it *batchItem, dst []byte) error {
	if !r.window.streamData || it.file.mappedOnly() || r.fromWarmBlock(it) {
		it.src = it.file.data[it.off:it.end]
		return nil
	}
	if it.inPlace() {
		it.src = dst[it.out : it.out+it.size]
	} else {
		it.src = make([]byte, it.end-it.off)
	}
	if len(it.src) == 0 {
		return nil
	}
	return shrunk(engine.ReadFull(it.file.fd, it.src, int64(it.off)))
}

// faultAt is the withFaultGuard location of the batch item *cur points to, or of the file
// at path when no item is in hand yet.
func faultAt(cur **batchItem, path string) func() (string, int64) {
	return func() (string, int64) {
		if it := *cur; it != nil && it.file != nil {
			return it.file.path, int64(it.local)
		}
		return path, -1
	}
}

// probeCount is how many samples of a batch are checked for page-cache residency, and
// warmProbeCount how many once warmStreak batches in a row were found resident: a probe
// (mincore) costs 1.5-3.5 µs here, ~10 µs a batch for four, and a warm dataset stays warm.
// A probe that finds a page missing starts the count again.
const (
	probeCount     = 4
	warmProbeCount = 1
	warmStreak     = 16
)

// resident guesses whether a batch is in the page cache from a few of its samples: a cold
// batch copied from the mapping would take one blocking page fault after another, where
// the engine keeps many reads in flight.
func (r *Reader) resident(b *batch) bool {
	streak := b.streak
	if streak == nil {
		streak = &r.residentBatches
	}
	items := b.items
	probes := probeCount
	if streak.Load() >= warmStreak {
		probes = warmProbeCount
	}
	probes = min(probes, len(items))
	for p := range probes {
		it := &items[(2*p+1)*len(items)/(2*probes)]
		if it.end > it.off && !pageResident(it.file.data, it.off) {
			streak.Store(0)
			return false
		}
	}
	streak.Add(1)
	return true
}

// readCold reads the stored bytes of a batch's items not yet in memory (src unset) with
// the engine, setting each one's src: raw samples straight into dst, encoded ones into a
// scratch buffer to be decoded. The items of files without a descriptor are left in their
// mappings, whose reads are started all at once (MADV_WILLNEED) so that copying them
// does not wait for one page fault after another.
func (r *Reader) readCold(b *batch, dst []byte, direct bool) error {
	engineReads := 0
	for k := range b.items {
		it := &b.items[k]
		if it.src != nil {
			continue
		}
		if !it.file.mappedOnly() {
			engineReads++
			continue
		}
		it.src = it.file.data[it.off:it.end]
		if it.end > it.off {
			it.file.adviseWillNeed(it.off, it.end)
		}
	}
	if engineReads == 0 {
		return nil
	}
	eng, err := defaultEngine()
	if err != nil {
		return fmt.Errorf("batch engine: %w", err)
	}
	var encoded uint64
	for k := range b.items {
		if it := &b.items[k]; it.src == nil && !it.inPlace() {
			encoded += it.end - it.off
		}
	}
	scratch := make([]byte, encoded)
	var buffered []engine.Request
	for k := range b.items {
		it := &b.items[k]
		if it.src != nil {
			continue
		}
		if it.inPlace() {
			it.src = dst[it.out : it.out+it.size]
		} else {
			it.src, scratch = scratch[:it.end-it.off], scratch[it.end-it.off:]
		}
		if len(it.src) == 0 {
			continue
		}
		req := engine.Request{FD: it.file.fd, Off: int64(it.off), Buf: it.src}
		if direct && it.file.directFd < 0 {
			buffered = append(buffered, req)
			continue
		}
		if direct {
			req.FD = it.file.directFd
		}
		b.reqs = append(b.reqs, req)
	}
	if err := readWith(eng, b.reqs, direct); err != nil {
		return err
	}
	return readWith(eng, buffered, false)
}

func readWith(eng engine.Engine, reqs []engine.Request, direct bool) error {
	if len(reqs) == 0 {
		return nil
	}
	return shrunk(eng.Read(reqs, direct))
}

// shrunk reports a read that met the end of its file as ErrCorrupt: the header placed the
// sample inside the file when it was opened.
func shrunk(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: a file of the dataset shrank while open: %w", ErrCorrupt, err)
	}
	return err
}

// readInto fetches every item's stored bytes and checks and copies or decodes them into
// dst. A large batch is cut into runs of about equal bytes, one per core: local runs are
// each fetched and delivered by their own goroutine, so that reading from the page cache
// (a system call, or a copy out of the mapping) and checking use every core; a remote
// batch is fetched whole first (one request plan), then delivered in parallel. cur tracks
// the item in hand for fault reports.
func (r *Reader) readInto(b *batch, dst []byte, cur **batchItem) error {
	workers := runtime.GOMAXPROCS(0)
	if workers < 2 || len(b.items) < 2 || uint64(len(dst)) < parallelBytes {
		if err := r.fetch(b, dst); err != nil {
			return err
		}
		return r.deliverRange(b.items, dst, cur)
	}
	parts := splitByBytes(b.items, workers, uint64(len(dst)))
	if r.remote {
		if err := r.fetch(b, dst); err != nil {
			return err
		}
		return inParallel(parts, cur, func(part []batchItem, cur **batchItem) error {
			return r.deliverRange(part, dst, cur)
		})
	}
	return inParallel(parts, cur, func(part []batchItem, cur **batchItem) error {
		if err := r.fetch(&batch{items: part, streak: b.streak}, dst); err != nil {
			return err
		}
		return r.deliverRange(part, dst, cur)
	})
}

// inParallel runs fn on every part, the first on this goroutine (cur tracking its item in
// hand), each other on a goroutine of its own with a fault guard of its own.
func inParallel(parts [][]batchItem, cur **batchItem, fn func([]batchItem, **batchItem) error) error {
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for p := 1; p < len(parts); p++ {
		wg.Go(func() {
			var mine *batchItem
			errs[p] = withFaultGuard(faultAt(&mine, parts[p][0].file.path),
				func() error { return fn(parts[p], &mine) })
		})
	}
	errs[0] = fn(parts[0], cur)
	wg.Wait()
	return errors.Join(errs...)
}

// splitByBytes cuts items into at most n runs of roughly equal output size.
func splitByBytes(items []batchItem, n int, total uint64) [][]batchItem {
	parts := make([][]batchItem, 0, n)
	share := total/uint64(n) + 1
	start := 0
	for k := range items {
		if len(parts) < n-1 && items[k].out+items[k].size >= share*uint64(len(parts)+1) {
			parts = append(parts, items[start:k+1])
			start = k + 1
		}
	}
	if start < len(items) {
		parts = append(parts, items[start:])
	}
	return parts
}

// The first cache lines of the samples a few places ahead in a batch are loaded into the
// CPU's caches while the current one is copied: a warm batch of small random samples is
// bound by memory latency (cache and TLB misses), not bandwidth, and this keeps several
// misses in flight (measured: 87 → 62 µs of CPU per 256 × 1 KiB batch with checks). Only
// the start of each sample is asked for; the hardware prefetcher follows a stream once it
// has begun. The header entries of a sample (its offsets, its checksum) are random reads
// too: they are asked for while the samples a few places before it are planned (measured
// together, 8 places ahead for both: 105 → 90 µs of CPU per such batch, from 4 ahead and
// none for the header).
const (
	cacheLinesAhead  = 8
	cacheLinesBytes  = 4096
	headerLinesAhead = 8
)

// loadHeaderLines starts loading the header entries that planning it and checking it read.
func (r *Reader) loadHeaderLines(it *batchItem) {
	f := it.file
	loadCacheLines(unsafe.Pointer(&f.data[offsetPos(f.stored, it.local)]), 2*offsetSize)
	if r.opts.CheckData {
		loadCacheLines(unsafe.Pointer(&f.data[checksumPos(it.local)]), checksumSize)
	}
}

func (r *Reader) deliverRange(items []batchItem, dst []byte, cur **batchItem) error {
	for k := range items {
		it := &items[k]
		*cur = it
		if k+cacheLinesAhead < len(items) {
			next := &items[k+cacheLinesAhead]
			if len(next.src) > 0 {
				loadCacheLines(unsafe.Pointer(&next.src[0]), uintptr(min(len(next.src), cacheLinesBytes)))
			}
		}
		if err := r.deliver(it, dst[it.out:it.out+it.size]); err != nil {
			return err
		}
	}
	return nil
}

// deliver checks one sample's stored bytes and puts its original bytes in out. A raw
// sample is copied first and checked in its new place: the copy pulls it from memory
// with many loads in flight, and the checksum then reads it from cache.
func (r *Reader) deliver(it *batchItem, out []byte) error {
	if it.inPlace() {
		if len(out) > 0 && &out[0] != &it.src[0] {
			copy(out, it.src)
		}
		return r.checkSample(it, out)
	}
	if err := r.checkSample(it, it.src); err != nil {
		return err
	}
	if err := decode(it.compression, it.src, out); err != nil {
		return sampleError(&fileError{path: it.file.path, index: int64(it.local), err: err}, it.global, it.local)
	}
	return nil
}

// checkSample compares the CRC-32 of a sample's stored bytes with the header's, when the
// reader checks data.
func (r *Reader) checkSample(it *batchItem, stored []byte) error {
	if !r.opts.CheckData || it.checked {
		return nil
	}
	return checkStored(it.file, it.local, it.global, stored)
}

// checkStored compares the CRC-32 of sample local of f (global in the dataset), as stored,
// with the header's.
func checkStored(f *dataFile, local, global uint64, stored []byte) error {
	if want, got := f.checksum(local), checksumIEEE(stored); want != got {
		return sampleError(errorf(f.path, int64(local), ErrChecksum,
			"stored 0x%08x, computed 0x%08x", want, got), global, local)
	}
	return nil
}
