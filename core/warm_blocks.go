package core

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// Warm blocks of a dataset past mappedBudget. Its samples are read with system calls so
// that the mappings stay small (mapped.go), but warm data costs less copied from the
// mapping: the copy out of the page cache is the same, and the system call and the
// kernel's page lookups are spared (measured, 16 KiB samples of a warm 328 MB file: 1.5-1.8
// µs of a 10 µs DatasetReader[i]; a loader worker's CPU per batch of 64 such samples went
// from 0.90-0.95 to 0.68-0.71 ms). So lone samples and the samples of a batch are
// copied from the mapping when their blocks (warmBlock bytes of a file) are admitted, and
// read with the engine otherwise. Two rules keep that from costing what the budget guards
// against:
//
//   - only warm blocks are admitted: the first read in a block checks with mincore that
//     all of it is in the page cache. A fault on a cold page would read around it
//     (read_ahead_kb, 8 MiB on some disks), where pread reads just the sample, and a batch
//     faulting one cold page after another would lose the engine's many reads in flight;
//     a block found partly cold is read with the engine, and probed again only after as
//     many refusals as there are blocks (about one pass over the data), so that partly
//     cold data does not pay a probe per read;
//   - at most mappedBudget's worth of blocks is ever admitted, so what the mapping holds
//     stays bounded whatever is read (no drop and fault again: the first blocks found
//     warm keep their place).
type warmBlocks struct {
	once     sync.Once
	starts   []uint64        // per file: the number of its first block among all files'
	admitted []atomic.Uint64 // a bit per block: found warm, read through the mapping
	refused  []atomic.Uint64 // a bit per block: found partly cold
	mapped   atomic.Uint64   // admitted blocks
	refusals atomic.Uint64   // since the refused bits were last cleared
}

// warmBlock is the unit of the account: the largest folio of the page cache
// (a PMD), which a page fault may map whole. Folios are aligned on their size in the file.
const warmBlock = 2 << 20

// warmMappedMax is the largest sample copied from the mapping past the budget; past it, the
// copy costs so much more than the system call that pread loses nothing.
const warmMappedMax = 256 << 10

// fromWarmBlock reports whether sample it (planned) of a dataset past the budget is to be
// copied from the mapping (see warmBlocks).
func (r *Reader) fromWarmBlock(it *batchItem) bool {
	k, _, err := r.locate(it.global)
	if err != nil || it.end <= it.off || it.end-it.off > warmMappedMax {
		return false
	}
	w := &r.warm
	w.once.Do(func() {
		w.starts = make([]uint64, len(r.files)+1)
		for j, f := range r.files {
			w.starts[j+1] = w.starts[j] + (f.size+warmBlock-1)/warmBlock
		}
		words := (w.starts[len(r.files)] + 63) / 64
		w.admitted, w.refused = make([]atomic.Uint64, words), make([]atomic.Uint64, words)
	})
	for b := it.off / warmBlock; b <= (it.end-1)/warmBlock; b++ {
		n := w.starts[k] + b
		word, bit := n/64, uint64(1)<<(n%64)
		switch {
		case w.admitted[word].Load()&bit != 0:
			continue
		case w.refused[word].Load()&bit != 0, (w.mapped.Load()+1)*warmBlock > mappedBudget:
			return false
		case !blockResident(it.file, b):
			w.refused[word].Or(bit)
			if w.refusals.Add(1) >= w.starts[len(r.files)] {
				w.refusals.Store(0)
				for j := range w.refused {
					w.refused[j].Store(0)
				}
			}
			return false
		case w.admitted[word].Or(bit)&bit == 0:
			w.mapped.Add(1)
		}
	}
	return true
}

// blockResident reports whether every page of block b of f is in the page cache; false
// when mincore fails.
func blockResident(f *dataFile, b uint64) bool {
	from, to := b*warmBlock, min((b+1)*warmBlock, f.size)
	var vec [warmBlock / 4096]byte // pages of 4 KiB or more
	if !mincore(unsafe.Pointer(&f.data[from]), uintptr(to-from), vec[:]) {
		return false
	}
	for _, v := range vec[:(to-from+pageSize-1)/pageSize] {
		if v&1 == 0 {
			return false
		}
	}
	return true
}
