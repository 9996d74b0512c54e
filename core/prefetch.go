package core

import (
	"sort"

	"github.com/ffrecord/ffrecord/core/source"
)

// maxPrefetching bounds the prefetches of one Reader running at once; past it, Prefetch
// drops its hint: a loader asks for its next batch faster than the disk could fetch it.
const maxPrefetching = 4

// Prefetch starts bringing the samples at indices into the page cache and returns without
// waiting for them, so that a later ReadBatch of them finds them there: a data loader
// prefetches a worker's next batch while the current one is processed. The reads are
// issued to the kernel as readahead of each sample's stored bytes (adjacent samples
// merged), all at once, so the disk sees them with as much depth as it takes.
//
// Prefetch is a hint: it reports only indices out of range and a closed reader; it does
// nothing for a reader in Direct mode (its reads bypass the page cache), for samples that
// a few probes find cached already, or while maxPrefetching earlier prefetches of the
// reader still run. Close waits for the running ones.
//
// For remote files read through the chunk cache, Prefetch is the download-ahead: it starts
// downloading the chunks holding the samples (those not cached yet, as many as the cache
// has room for beside the chunks being read) and returns how many it started.
//
// It returns how many reads it queued: 0 when it did nothing.
func (r *Reader) Prefetch(indices []uint64) (int, error) {
	if err := r.acquire(); err != nil {
		return 0, err
	}
	spans := make([]prefetchSpan, 0, len(indices))
	var cur *batchItem
	err := withFaultGuard(faultAt(&cur, r.files[0].path), func() error {
		it := new(batchItem)
		cur = it
		for _, index := range indices {
			fk, local, err := r.locate(index)
			if err != nil {
				return err
			}
			if err := r.plan(it, r.files[fk], local, r.starts[fk]); err != nil {
				return err
			}
			if it.end > it.off {
				spans = append(spans, prefetchSpan{file: it.file, order: fk, off: it.off, end: it.end})
			}
		}
		return nil
	})
	if err == nil && r.remote {
		r.mu.RUnlock()
		return downloadAhead(spans), nil
	}
	if err != nil || r.opts.Direct || len(spans) == 0 || cachedSpans(spans) {
		r.mu.RUnlock()
		return 0, err
	}
	if r.prefetching.Add(1) > maxPrefetching {
		r.prefetching.Add(-1)
		r.mu.RUnlock()
		return 0, nil
	}
	// The read lock passes to the goroutine: Close waits for it.
	go func() {
		defer r.mu.RUnlock()
		defer r.prefetching.Add(-1)
		readahead(spans)
	}()
	return len(spans), nil
}

// downloadAhead starts downloading the chunks holding the spans of remote files read
// through the chunk cache (those not cached yet, as many as the cache has room for) and
// returns how many chunks it started (or found missing while a download ahead runs);
// without a cache it does nothing.
func downloadAhead(spans []prefetchSpan) int {
	byFile := map[*source.Cached][]int64{}
	for _, s := range spans {
		if s.file.remote == nil {
			continue
		}
		if c, ok := s.file.remote.src.(*source.Cached); ok {
			byFile[c] = append(byFile[c], int64(s.off))
		}
	}
	started := 0
	for c, offsets := range byFile {
		started += c.Prefetch(offsets)
	}
	return started
}

// prefetchSpan is stored bytes [off, end) of file, the reader's file number order.
type prefetchSpan struct {
	file     *dataFile
	order    int
	off, end uint64
}

// cachedSpans guesses from a few of the spans whether they are all in the page cache
// already, as a warm dataset's are: asking the kernel for them again would only cost a
// system call each.
func cachedSpans(spans []prefetchSpan) bool {
	probes := min(probeCount, len(spans))
	for p := range probes {
		s := &spans[p*len(spans)/probes]
		if !pageResident(s.file.data, s.off) {
			return false
		}
	}
	return true
}

// readahead asks the kernel to read the spans into the page cache, in file order with
// adjacent or overlapping spans merged; WILLNEED advice (fadvise, or madvise for a file
// without a descriptor) queues the reads and returns.
func readahead(spans []prefetchSpan) {
	sort.Slice(spans, func(a, b int) bool {
		if spans[a].order != spans[b].order {
			return spans[a].order < spans[b].order
		}
		return spans[a].off < spans[b].off
	})
	run := spans[0]
	for _, s := range spans[1:] {
		if s.file == run.file && s.off <= run.end {
			run.end = max(run.end, s.end)
			continue
		}
		run.file.adviseWillNeed(run.off, run.end)
		run = s
	}
	run.file.adviseWillNeed(run.off, run.end)
}
