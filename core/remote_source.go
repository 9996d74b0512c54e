package core

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/ffrecord/ffrecord/core/internal/parallel"
	"github.com/ffrecord/ffrecord/core/remote"
	"github.com/ffrecord/ffrecord/core/source"
	"golang.org/x/sys/unix"
)

// remoteFile is what a dataFile read over HTTP(S) or S3 has instead of a descriptor.
//
// Its data is a private anonymous mapping as large as the object, an image of it in which
// only the header (and the last sample, when it may be an extension record) are present:
// the format's code reads the header in place as it reads a local file's mapping, and
// untouched pages of the image cost nothing. Sample data is read per batch from src (the
// object, under the node's chunk cache when there is one) into the caller's buffer.
type remoteFile struct {
	src source.Source
}

// firstFetch is how much of an object the first request asks for with a chunk cache: the
// whole header of any file of up to ~87k samples, so that opening most files takes one
// round trip (the node opens a file once: its header is kept in the cache).
const firstFetch = 1 << 20

// uncachedFirstFetch is firstFetch without a cache: the header of a file of up to ~5k
// samples. Every process opens every file in every epoch (a loader's workers among them),
// and the sample bytes that come along are dropped, so they are kept few: a larger header
// costs a second request instead.
const uncachedFirstFetch = 64 << 10

// FirstRequestBytes is how many bytes from the start of a remote file the request that
// reads its header asks for, with a chunk cache of chunkSize (0: none, uncachedFirstFetch):
// firstFetch, and for a reader's first file (readAhead) one chunk more, its first chunk
// whole whenever the header fits in firstFetch. With a cache, the chunks lying wholly in
// those bytes are cached from them, and cost no GET of their own: a file of up to about a
// chunk is read whole by one GET, and a large file's first chunk comes with its header.
// Only the first file reads ahead, so that opening a dataset of many files downloads at
// most one chunk that this node's share of the order may not need. ffrecord.plan models it.
func FirstRequestBytes(chunkSize int64, readAhead bool) int64 {
	switch {
	case chunkSize <= 0:
		return uncachedFirstFetch
	case readAhead:
		return firstFetch + chunkSize
	}
	return firstFetch
}

// openRemoteFile opens the object at url: its size and ETag, its header (from the cache
// when there), then the checks openDataFile makes of a local file. With a cache directory,
// sample data is then read through the chunk cache, which the request that read the
// header seeds (FirstRequestBytes; readAhead: the reader's first file).
func openRemoteFile(url string, opts ReaderOptions, stats *source.Stats, readAhead bool) (_ *dataFile, warnings []string, err error) {
	src, err := source.Open(url, opts.Remote, stats)
	if err != nil {
		return nil, nil, invalidOptions(err)
	}
	f := &dataFile{path: url, fd: -1, directFd: -1, size: uint64(src.Size()), remote: &remoteFile{src: src}}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	if err := checkMappable(url, f.size); err != nil {
		return nil, nil, err
	}
	f.data, err = unix.Mmap(-1, 0, int(f.size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: mapping an image of %d bytes: %w", url, f.size, err)
	}
	cache, err := openHeaderCache(opts.Remote, url, src.Version(), f.size, stats)
	if err != nil {
		return nil, nil, err
	}
	// The node's processes opening the object at once (a job's workers and ranks) wait
	// for the first to fetch the header and seed the chunk cache, then find both there.
	defer cache.lock()()
	var fetched uint64 // bytes [0, fetched) of the object arrived with the header
	if !cache.load(f.data) {
		chunkSize := int64(0)
		if cache.store != nil {
			chunkSize = opts.Remote.ChunkSize
		}
		if fetched, err = f.fetchHeader(uint64(FirstRequestBytes(chunkSize, readAhead))); err != nil {
			return nil, nil, err
		}
		cache.save(f.data)
	}
	where := func() (string, int64) { return url, -1 }
	if err := withFaultGuard(where, func() error { return f.parseHeader(opts.CheckData, &warnings) }); err != nil {
		return nil, nil, err
	}
	if err := withFaultGuard(where, func() error { return f.useChunkCache(opts, stats, fetched) }); err != nil {
		return nil, nil, err
	}
	return f, warnings, nil
}

// useChunkCache puts the file's source under the chunk cache of opts.Remote.CacheDir (none:
// the source stays as it is; an object without an ETag cannot be keyed, and is not cached),
// and caches the chunks lying wholly in bytes [0, fetched) of the image, downloaded with
// the header.
func (f *dataFile) useChunkCache(ropts ReaderOptions, stats *source.Stats, fetched uint64) error {
	opts := ropts.Remote
	if opts.CacheDir == "" || f.remote.src.Version() == "" {
		return nil
	}
	bounds, err := f.chunkOffsets(uint64(opts.ChunkSize))
	if err != nil || len(bounds) < 2 {
		return err
	}
	store, err := source.OpenStore(opts.CacheDir, opts.CacheLimit)
	if err == nil {
		var cached *source.Cached
		if cached, err = source.NewCached(f.remote.src, store, bounds, stats); err == nil {
			cached.SamplesChecked = ropts.CheckData // fetchChecked checks each sample read
			f.remote.src = cached
			cached.Seed(f.data[:fetched])
			f.dropData(fetched)
		}
	}
	if errors.Is(err, source.ErrCacheLimit) {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return err
}

// readFrom is where f's sample data is read from.
func (f *dataFile) readFrom() ReadFrom {
	if f.remote == nil {
		return ReadLocal
	}
	if _, cached := f.remote.src.(*source.Cached); cached {
		return ReadCached
	}
	return ReadRemote
}

// invalidOptions marks the failure to reach an object that is the options' or the URL's
// fault (a bad endpoint, scheme or option) as ErrInvalid; the store's answers stay as
// they are.
func invalidOptions(err error) error {
	var oe *source.OptionsError
	if errors.As(err, &oe) {
		return fmt.Errorf("%w: %w", ErrInvalid, oe.Err)
	}
	return err
}

// fetchHeader brings the header, and the last sample when it is small enough to be an
// extension record, into the image, the first request asking for the first bytes of the
// object. It returns how many bytes from the start of the object the image now holds.
func (f *dataFile) fetchHeader(firstBytes uint64) (uint64, error) {
	first := min(f.size, firstBytes)
	if err := f.fetchFirst(first); err != nil {
		return 0, err
	}
	header, ok := headerSize(le.Uint64(f.data[metaChecksumSize:]))
	if !ok || header > f.size {
		return first, nil // parseHeader reports it
	}
	if err := f.fetch(first, max(first, header)); err != nil {
		return 0, err
	}
	off, end, ok := f.tailSpan(header)
	if !ok {
		return max(first, header), nil
	}
	return max(first, header), f.fetch(max(off, first), max(end, first))
}

// dropData frees the image's pages of sample data that arrived with the header (now in
// the chunk cache): samples are read from the source, never from the image, but for an
// extension record at the end, which stays.
func (f *dataFile) dropData(fetched uint64) {
	to := fetched
	if off, _, ok := f.tailSpan(f.header); ok {
		to = min(to, off)
	}
	from := (f.header + pageSize - 1) &^ (pageSize - 1)
	to &^= pageSize - 1
	if from < to {
		_ = unix.Madvise(f.data[from:to], unix.MADV_DONTNEED)
	}
}

// tailSpan is where the last sample is stored, when it could be an extension record.
func (f *dataFile) tailSpan(header uint64) (off, end uint64, ok bool) {
	stored := le.Uint64(f.data[metaChecksumSize:])
	if stored == 0 {
		return 0, 0, false
	}
	off, end = le.Uint64(f.data[offsetPos(stored, stored-1):]), f.size
	want, fits := extRecordSize(stored - 1)
	if !fits || off < header || off > end || end-off != want {
		return 0, 0, false
	}
	return off, end, true
}

// fetchFirst reads bytes [0, end) of the object into the image with one request, when
// the source can (ReadRanges would split a large span over several).
func (f *dataFile) fetchFirst(end uint64) error {
	one, ok := f.remote.src.(source.SpanReader)
	if !ok {
		return f.fetch(0, end)
	}
	return remoteError(f.path, -1, one.ReadSpan(source.Span{Off: 0, Buf: f.data[:end]}))
}

// fetch reads bytes [off, end) of the object into the image.
func (f *dataFile) fetch(off, end uint64) error {
	if end <= off {
		return nil
	}
	return f.fetchInto(f.data[off:end], off)
}

// remoteError names the file and sample of a failed remote read; a body still cut short
// after a retry means the object does not hold what its header says: corruption.
func remoteError(path string, index int64, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, remote.ErrShortBody) {
		return errorf(path, index, ErrCorrupt, "%v", err)
	}
	return &fileError{path: path, index: index, err: err}
}

// fetchRemote is fetch for a dataset with remote files: each remote file's items are read
// by concurrent range requests, raw samples straight into dst; items of local files are
// served from their mappings. With CheckData, a sample whose bytes do not match their
// CRC-32 is fetched once more before deliver reports it (a body damaged in transit).
func (r *Reader) fetchRemote(b *batch, dst []byte) error {
	var encoded, delivered uint64
	for k := range b.items {
		if it := &b.items[k]; it.file.remote != nil {
			delivered += it.end - it.off
			if !it.inPlace() {
				encoded += it.end - it.off
			}
		}
	}
	scratch := make([]byte, encoded)
	// The items of each remote file; a batch of one file (the common case: a whole
	// field of labels is 20,000 items) asks the map nothing per item.
	var byFile []fileItems
	group := map[*dataFile]int{}
	last := -1
	for k := range b.items {
		it := &b.items[k]
		switch {
		case it.file.remote == nil:
			it.src = it.file.data[it.off:it.end]
			continue
		case it.inPlace():
			it.src = dst[it.out : it.out+it.size]
		default:
			it.src, scratch = scratch[:it.end-it.off], scratch[it.end-it.off:]
		}
		if len(it.src) == 0 {
			continue
		}
		if last < 0 || byFile[last].f != it.file {
			g, ok := group[it.file]
			if !ok {
				g = len(byFile)
				group[it.file] = g
				var items []int
				if g == 0 { // room for the whole batch
					items = make([]int, 0, len(b.items)-k)
				}
				byFile = append(byFile, fileItems{f: it.file, items: items})
			}
			last = g
		}
		byFile[last].items = append(byFile[last].items, k)
	}
	// Files are fetched at once: a batch drawn from the many parts of a dump would
	// otherwise wait one round trip per file. The client's pool bounds the requests.
	err := parallel.Each(len(byFile), parallel.UpTo(len(byFile)-1), func() {}, func(g int) error {
		return r.fetchChecked(byFile[g].f, b.items, byFile[g].items)
	})
	if err == nil {
		r.delivered.Add(int64(delivered))
	}
	return err
}

// fileItems are the items (indices into a batch's items) of remote file f.
type fileItems struct {
	f     *dataFile
	items []int
}

// fetchChecked fetches items of remote file f and, with CheckData, fetches once more
// those whose bytes do not match their CRC-32 (deliver reports them if they still differ).
func (r *Reader) fetchChecked(f *dataFile, all []batchItem, items []int) error {
	if err := r.fetchItems(f, all, items); err != nil || !r.opts.CheckData {
		return err
	}
	// Checked on every core at once when the batch is large, as deliver checks a local
	// file's samples; deliver then need not check them again.
	var bytes uint64
	for _, k := range items {
		bytes += uint64(len(all[k].src))
	}
	helpers := 0
	if bytes >= parallelBytes {
		helpers = runtime.GOMAXPROCS(0) - 1
	}
	_ = parallel.Each(len(items), parallel.UpTo(helpers), func() {}, func(i int) error {
		it := &all[items[i]]
		it.checked = it.file.checksum(it.local) == checksumIEEE(it.src)
		return nil
	})
	var damaged []int
	cache, cached := f.remote.src.(source.Invalidator)
	for _, k := range items {
		it := &all[k]
		if !it.checked {
			damaged = append(damaged, k)
			if cached { // a chunk damaged on the cache's disk is downloaded again
				cache.Invalidate(int64(it.off), int64(it.end))
			}
		}
	}
	return r.fetchItems(f, all, damaged)
}

// fetchItems reads the stored bytes of items (indices into all) of remote file f.
func (r *Reader) fetchItems(f *dataFile, all []batchItem, items []int) error {
	if len(items) == 0 {
		return nil
	}
	spans := make([]source.Span, len(items))
	for s, k := range items {
		spans[s] = source.Span{Off: int64(all[k].off), Buf: all[k].src}
	}
	err := f.remote.src.ReadRanges(spans)
	var se *source.SpanError
	if err == nil || !errors.As(err, &se) {
		return remoteError(f.path, -1, err)
	}
	it := &all[items[se.Index]]
	return sampleError(remoteError(f.path, int64(it.local), err), it.global, it.local)
}

// fetchInto reads len(p) bytes of the object from off into p.
func (f *dataFile) fetchInto(p []byte, off uint64) error {
	err := f.remote.src.ReadRanges([]source.Span{{Off: int64(off), Buf: p}})
	return remoteError(f.path, -1, err)
}

// openFile opens a local file or, for a URL, a remote one whose requests stats counts.
// first: the reader's first file (a remote one reads ahead, FirstRequestBytes).
func openFile(name string, opts ReaderOptions, stats *source.Stats, first bool) (*dataFile, []string, error) {
	if remote.IsURL(name) {
		return openRemoteFile(name, opts, stats, first)
	}
	return openDataFile(name, opts)
}

// expandURL is expandPaths for a URL: an s3:// prefix (a URL ending in "/", or one not
// ending in ".ffr" under which *.ffr objects are found) stands for its *.ffr objects in
// key order; any other URL for itself.
func expandURL(p string, opts remote.Options) ([]string, error) {
	if !strings.HasPrefix(strings.ToLower(p), "s3://") || strings.HasSuffix(p, ".ffr") {
		return []string{p}, nil
	}
	urls, err := DatasetURLs(p, opts)
	if err != nil {
		return nil, err
	}
	if len(urls) > 0 {
		return urls, nil
	}
	if strings.HasSuffix(p, "/") || strings.Count(p, "/") == 2 {
		return nil, errorf(p, -1, ErrInvalid, "prefix holds no *.ffr object")
	}
	return []string{p}, nil
}
