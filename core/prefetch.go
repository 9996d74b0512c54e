package core

import (
	"sort"

	"golang.org/x/sys/unix"
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
// nothing for a reader in Direct mode (its reads bypass the page cache) or while
// maxPrefetching earlier prefetches of the reader still run. Close waits for the running ones.
func (r *Reader) Prefetch(indices []uint64) error {
	if err := r.acquire(); err != nil {
		return err
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
				spans = append(spans, prefetchSpan{fd: it.file.fd, off: it.off, end: it.end})
			}
		}
		return nil
	})
	if err != nil || r.opts.Direct || len(spans) == 0 {
		r.mu.RUnlock()
		return err
	}
	if r.prefetching.Add(1) > maxPrefetching {
		r.prefetching.Add(-1)
		r.mu.RUnlock()
		return nil
	}
	// The read lock passes to the goroutine: Close waits for it.
	go func() {
		defer r.mu.RUnlock()
		defer r.prefetching.Add(-1)
		readahead(spans)
	}()
	return nil
}

// prefetchSpan is stored bytes [off, end) of the file open as fd.
type prefetchSpan struct {
	fd       int
	off, end uint64
}

// readahead asks the kernel to read the spans into the page cache, in file order with
// adjacent or overlapping spans merged; POSIX_FADV_WILLNEED queues the reads and returns.
func readahead(spans []prefetchSpan) {
	sort.Slice(spans, func(a, b int) bool {
		if spans[a].fd != spans[b].fd {
			return spans[a].fd < spans[b].fd
		}
		return spans[a].off < spans[b].off
	})
	run := spans[0]
	for _, s := range spans[1:] {
		if s.fd == run.fd && s.off <= run.end {
			run.end = max(run.end, s.end)
			continue
		}
		adviseWillNeed(run)
		run = s
	}
	adviseWillNeed(run)
}

func adviseWillNeed(s prefetchSpan) {
	_ = unix.Fadvise(s.fd, int64(s.off), int64(s.end-s.off), unix.FADV_WILLNEED)
}
