package source

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/ffrecord/ffrecord/core/internal/parallel"
)

// ErrCacheLimit: a cache limit too small for the chunks a reader needs at once.
var ErrCacheLimit = errors.New("cache limit too small")

// MinChunks is how many chunks of a reader the cache must hold at once: the one being read
// and the one being downloaded ahead.
const MinChunks = 2

// chunkFetches bounds the chunks a read or a prefetch downloads at once.
const chunkFetches = 4

// Cached is a Source read through a Store, chunk by chunk: each chunk is downloaded whole
// (one request) into the store and served from there. Chunks are the byte ranges between
// consecutive bounds; bytes outside them (a file's header) are read from the source below.
type Cached struct {
	under  Source
	store  *Store
	key    string
	bounds []int64
	stats  *Stats

	// SamplesChecked: the reader checks the CRC-32 of every sample it serves (and
	// Invalidates the chunks of one found damaged), so the chunk files' own CRC-32s need
	// not be checked first, which would read every chunk once more in each process. (Their
	// seals are checked all the same: a chunk file holding another chunk's bytes, with
	// their right CRC-32s, is never served.)
	SamplesChecked bool

	prefetching atomic.Int32
	readAhead   []atomic.Bool // chunk k's cached file was read ahead into the page cache

	heldMu sync.Mutex
	held   []*heldChunk // the chunks read last, least recently used first
}

// heldChunks bounds the cached chunks a reader keeps open and mapped between reads: a
// chunk-aware order's window (and the next) is read from memory, with no system call per
// sample or per batch, as a local file's mapping is. Each is under its shared lock, so it
// cannot be evicted while held: under a cache limit a reader holds one (heldLimit), so
// that the node's processes never pin what the limit needs for the chunks to come.
const heldChunks = 8

// heldChunk is a chunk kept leased (a mapped chunk file) between reads; users count the
// reads using it now, and a chunk no longer held is released when the last one ends.
type heldChunk struct {
	k       int
	ch      *chunk
	users   int
	dropped bool
}

// NewCached puts src under store, with chunk bounds (ascending byte offsets; chunk k is
// [bounds[k], bounds[k+1])). src must have a Version. A store whose limit cannot hold
// MinChunks of the largest chunk is refused (ErrCacheLimit), naming the minimum.
func NewCached(src Source, store *Store, bounds []int64, stats *Stats) (*Cached, error) {
	if src.Version() == "" {
		return nil, fmt.Errorf("%w: %s has no version (ETag) to key its chunks by", ErrCache, src.Name())
	}
	if need := MinCacheLimit(bounds); store.limit > 0 && store.limit < need {
		return nil, fmt.Errorf("%w: cache_limit %s is below the %s that %s needs (%d chunks of up to %s at once); raise cache_limit or lower chunk_size",
			ErrCacheLimit, describe(store.limit), describe(need), src.Name(), MinChunks, describe(need/MinChunks-sealSize))
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", src.Name(), src.Version(), src.Size()))
	return &Cached{under: src, store: store, key: hex.EncodeToString(sum[:16]), bounds: bounds, stats: stats,
		readAhead: make([]atomic.Bool, max(0, len(bounds)-1))}, nil
}

// MinCacheLimit is the smallest cache limit that holds MinChunks of the largest chunk.
func MinCacheLimit(bounds []int64) int64 {
	var largest int64
	for k := 1; k < len(bounds); k++ {
		largest = max(largest, bounds[k]-bounds[k-1])
	}
	return MinChunks * (largest + sealSize)
}

func (c *Cached) Name() string    { return c.under.Name() }
func (c *Cached) Size() int64     { return c.under.Size() }
func (c *Cached) Version() string { return c.under.Version() }

// Close releases the held chunks and the source below.
func (c *Cached) Close() error {
	c.heldMu.Lock()
	for len(c.held) > 0 {
		c.drop(len(c.held) - 1)
	}
	c.heldMu.Unlock()
	return c.under.Close()
}

// chunkName is the file name of chunk k in the store.
func (c *Cached) chunkName(k int) string {
	return fmt.Sprintf("%s-%d-%d.chunk", c.key, c.bounds[k], c.bounds[k+1]-c.bounds[k])
}

// chunkID is the identity of chunk k that its file is sealed with: the object's URL,
// version and size, and the chunk's byte range.
func (c *Cached) chunkID(k int) Identity {
	return identify("chunk", c.under.Name(), c.under.Version(), c.under.Size(), c.bounds[k], c.bounds[k+1]-c.bounds[k])
}

// chunkOf is the chunk holding byte off, or -1.
func (c *Cached) chunkOf(off int64) int {
	k := sort.Search(len(c.bounds), func(i int) bool { return c.bounds[i] > off }) - 1
	if k < 0 || k >= len(c.bounds)-1 {
		return -1
	}
	return k
}

// part is the piece of a caller's span that lies in chunk k: bytes [at, at+n) of the
// span's buffer, from off in the chunk. (No pointer in it: a batch of many small samples
// makes one allocation the GC need not scan.)
type part struct {
	k, span, at, n int
	off            int64
}

// ReadRanges serves spans from their chunks, downloading the missing chunks (a few at
// once), and reads bytes outside the chunks from the source below.
func (c *Cached) ReadRanges(spans []Span) error {
	// One slice of parts, grouped by chunk: a batch of many small samples (a field of
	// labels read whole: one span per datapoint) allocates little.
	parts := make([]part, 0, len(spans))
	var outside []Span
	var outsideSpan []int
	k := -1
	for i, sp := range spans {
		for at := 0; at < len(sp.Buf); {
			off := sp.Off + int64(at)
			if k < 0 || off < c.bounds[k] || off >= c.bounds[k+1] {
				if k = c.chunkOf(off); k < 0 {
					outside = append(outside, Span{Off: off, Buf: sp.Buf[at:]})
					outsideSpan = append(outsideSpan, i)
					break
				}
			}
			n := int(min(int64(len(sp.Buf)-at), c.bounds[k+1]-off))
			parts = append(parts, part{k: k, span: i, at: at, n: n, off: off - c.bounds[k]})
			at += n
		}
	}
	byChunk := func(a, b part) int { return cmp.Compare(a.k, b.k) }
	if !slices.IsSortedFunc(parts, byChunk) {
		slices.SortStableFunc(parts, byChunk)
	}
	// Chunks held or cached are copied out here, on the calling goroutine: a helper
	// goroutine per chunk would cost more in thread wake-ups than the copy (a warm batch
	// drawn from a window of a few chunks), and the loader's workers keep the cores
	// busy anyway. Only the chunks to download are fetched a few at once.
	var missing [][]part
	for at := 0; at < len(parts); {
		run := parts[at:]
		for n := 1; n < len(run); n++ {
			if run[n].k != run[0].k {
				run = run[:n]
				break
			}
		}
		at += len(run)
		h, err := c.hold(run[0].k, false)
		if err == nil && h == nil {
			missing = append(missing, run)
			continue
		}
		if err = c.serve(h, err, spans, run); err != nil {
			return err
		}
	}
	err := parallel.Each(len(missing), parallel.UpTo(chunkFetches-1), func() {}, func(i int) error {
		h, err := c.hold(missing[i][0].k, true)
		return c.serve(h, err, spans, missing[i])
	})
	if err != nil || len(outside) == 0 {
		return err
	}
	if err := c.under.ReadRanges(outside); err != nil {
		var se *SpanError
		if errors.As(err, &se) {
			se.Index = outsideSpan[se.Index]
		}
		return err
	}
	return nil
}

// serve copies parts of spans (all of one chunk) out of h, the chunk held for this read
// (or the error of holding it), and ends the read.
func (c *Cached) serve(h *heldChunk, err error, spans []Span, parts []part) error {
	k := parts[0].k
	if err != nil {
		return &SpanError{Index: parts[0].span, Off: c.bounds[k], End: c.bounds[k+1], Err: err}
	}
	defer c.unhold(h)
	for _, p := range parts {
		if err := h.ch.readAt(spans[p.span].Buf[p.at:p.at+p.n], p.off); err != nil {
			return &SpanError{Index: p.span, Off: c.bounds[k] + p.off, End: c.bounds[k] + p.off + int64(p.n),
				Err: c.store.diskError("reading a chunk", err)}
		}
	}
	return nil
}

// hold returns chunk k held for a read (unhold when done): one held already, or the
// chunk leased and, when its file can be mapped, kept held for the reads that follow, the
// least recently used held chunk released if over the bound. A chunk not cached is
// downloaded when download is set, else hold returns nil.
func (c *Cached) hold(k int, download bool) (*heldChunk, error) {
	c.heldMu.Lock()
	for i, h := range c.held {
		if h.k == k {
			h.users++
			c.held = append(append(c.held[:i:i], c.held[i+1:]...), h)
			c.heldMu.Unlock()
			return h, nil
		}
	}
	c.heldMu.Unlock()
	ch, err := c.chunk(k, download)
	if err != nil || ch == nil {
		return nil, err
	}
	h := &heldChunk{k: k, ch: ch, users: 1}
	if !ch.mapFile(c.bounds[k+1] - c.bounds[k]) {
		h.dropped = true // not kept: released after this read
		return h, nil
	}
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	for _, other := range c.held {
		if other.k == k { // held meanwhile by another read: this lease is for this read only
			h.dropped = true
			return h, nil
		}
	}
	c.held = append(c.held, h)
	for len(c.held) > c.heldLimit() {
		c.drop(0)
	}
	return h, nil
}

// unhold ends a read of h.
func (c *Cached) unhold(h *heldChunk) {
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	if h.users--; h.users == 0 && h.dropped {
		h.ch.release()
	}
}

// drop stops holding c.held[i] (heldMu held): it is released now, or by its last read.
func (c *Cached) drop(i int) {
	h := c.held[i]
	c.held = append(c.held[:i], c.held[i+1:]...)
	if h.dropped = true; h.users == 0 {
		h.ch.release()
	}
}

// heldLimit is how many chunks the reader holds: heldChunks without a cache limit, else
// the one being read (MinChunks counts it).
func (c *Cached) heldLimit() int {
	if c.store.limit > 0 {
		return 1
	}
	return heldChunks
}

// chunk leases chunk k, downloading it with one request when it is not cached (unless
// download is unset: then a chunk not cached is nil). A cached chunk's file is read ahead
// whole the first time: the reads that follow find it in the page cache, as a chunk-aware
// order reads every sample of a chunk before long.
func (c *Cached) chunk(k int, download bool) (*chunk, error) {
	off := c.bounds[k]
	name, n, check := c.chunkName(k), c.bounds[k+1]-off, !c.SamplesChecked
	var ch *chunk
	var err error
	if download {
		ch, err = c.store.get(name, n, c.chunkID(k), check, func(buf []byte) error {
			if one, ok := c.under.(SpanReader); ok {
				return one.ReadSpan(Span{Off: off, Buf: buf})
			}
			return c.under.ReadRanges([]Span{{Off: off, Buf: buf}})
		}, c.stats)
	} else if ch = c.store.cached(name, n, c.chunkID(k), check, c.stats); ch == nil {
		return nil, nil
	}
	if err == nil && c.readAhead[k].CompareAndSwap(false, true) {
		ch.readAhead()
	}
	return ch, err
}

// Seed caches the chunks lying wholly in bytes [0, len(prefix)) of the object, which the
// caller has downloaded already (the request that read a file's header), so that they cost
// no GET of their own; a chunk cached already is left as it is. Seeding is best effort: a
// chunk that cannot be stored is downloaded when it is read.
func (c *Cached) Seed(prefix []byte) {
	for k := 0; k < len(c.bounds)-1 && c.bounds[k+1] <= int64(len(prefix)); k++ {
		off, end := c.bounds[k], c.bounds[k+1]
		ch, err := c.store.get(c.chunkName(k), end-off, c.chunkID(k), false, func(buf []byte) error {
			copy(buf, prefix[off:end])
			return nil
		}, c.stats)
		if err == nil {
			ch.release()
		}
	}
}

// Invalidate deletes the cached chunks overlapping bytes [off, end), found damaged.
func (c *Cached) Invalidate(off, end int64) {
	c.heldMu.Lock()
	for i := len(c.held) - 1; i >= 0; i-- {
		if k := c.held[i].k; c.bounds[k] < end && c.bounds[k+1] > off {
			c.drop(i)
		}
	}
	c.heldMu.Unlock()
	for k := c.chunkOf(off); k >= 0 && k < len(c.bounds)-1 && c.bounds[k] < end; k++ {
		c.store.forget(c.chunkName(k))
	}
}

// Prefetch downloads, in the background, the chunks holding the given byte offsets that
// are not cached yet, as many as the cache has room for beside the chunks being read
// (Store limit ÷ chunk size − MinChunks), and returns how many it started. A prefetch still
// running makes a new hint a no-op, so hints never pile up; it then returns how many of
// the hinted chunks are missing all the same, so that 0 always means "all cached" (a
// caller that pauses its hints then, as the torch Dataset does, keeps hinting).
//
// A chunk cached already is read ahead instead, once per reader: its file is read into
// the page cache in the background (one sequential read), so that a warm epoch does not
// wait on the disk for each sample, as a local file read ahead would not.
func (c *Cached) Prefetch(offsets []int64) int {
	var todo []int
	started := 0
	seen := map[int]bool{}
	for _, off := range offsets {
		if k := c.chunkOf(off); k >= 0 && !seen[k] {
			seen[k] = true
			switch {
			case c.readAhead[k].Load():
			case c.store.readAhead(c.chunkName(k)):
				c.readAhead[k].Store(true)
				started++
			default:
				todo = append(todo, k)
			}
		}
	}
	if room := c.room(); len(todo) > room {
		todo = todo[:room]
	}
	if len(todo) == 0 || !c.prefetching.CompareAndSwap(0, 1) {
		return started + len(todo)
	}
	go func() {
		defer c.prefetching.Store(0)
		_ = parallel.Each(len(todo), parallel.UpTo(chunkFetches-1), func() {}, func(i int) error {
			ch, err := c.chunk(todo[i], true)
			if err == nil {
				c.stats.Prefetched.Add(1)
				ch.release()
			}
			return nil // a hint: the read that needs the chunk reports any failure
		})
	}()
	return started + len(todo)
}

// room is how many chunks a prefetch may download: what the limit holds beside the
// MinChunks being read.
func (c *Cached) room() int {
	if c.store.limit == 0 {
		return 1 << 30
	}
	largest := MinCacheLimit(c.bounds) / MinChunks
	return max(0, int(c.store.limit/largest)-MinChunks)
}

var _ Invalidator = (*Cached)(nil)
