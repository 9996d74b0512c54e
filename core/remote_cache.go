package core

import (
	"github.com/ffrecord/ffrecord/core/remote"
	"github.com/ffrecord/ffrecord/core/source"
)

// headerCache keeps the header of remote files in the cache directory, so that the
// processes of a job (DataLoader workers, one per GPU) fetch a large header once. An entry
// (source.HeaderEntry) is keyed by URL, ETag and size, so a replaced object is never
// answered with its old header, and sealed with them and its CRC-32: one damaged, planted
// or left by an older layout is a miss, fetched again, never blamed on the object. An
// object without an ETag is not cached. An entry holds the header, then the bytes of the
// last sample when they were fetched (extension record): [0, header) ++ [tail, size).
type headerCache struct {
	store *source.Store // nil: no cache
	entry source.Entry
	size  uint64
	stats *source.Stats
}

// openHeaderCache is the header cache of the object at url (of that ETag and size) in the
// cache directory of opts: none without one, or for an object without an ETag. A cache
// directory that another user could write into is refused (source.OpenStore).
func openHeaderCache(opts remote.Options, url, etag string, size uint64, stats *source.Stats) (headerCache, error) {
	if opts.CacheDir == "" || etag == "" {
		return headerCache{}, nil
	}
	store, err := source.OpenStore(opts.CacheDir, opts.CacheLimit)
	if err != nil {
		return headerCache{}, err
	}
	return headerCache{store: store, entry: source.HeaderEntry(url, etag, size), size: size, stats: stats}, nil
}

// lock holds the entry's lock until the returned function is called, so that the
// processes opening the object at once fetch its header once. Without a cache, or when the
// lock cannot be taken, nothing is held: the lock saves requests, correctness never
// depends on it.
func (c *headerCache) lock() (unlock func()) {
	if c.store == nil {
		return func() {}
	}
	l, err := c.store.LockEntry(c.entry)
	if err != nil {
		return func() {}
	}
	return l.Release
}

// load fills image from the cache and reports whether it could.
func (c *headerCache) load(image []byte) bool {
	if c.store == nil {
		return false
	}
	entry, ok := c.store.Load(c.entry, int64(c.size))
	if !ok || uint64(len(entry)) < fixedHeaderSize {
		return false
	}
	header, ok := headerSize(le.Uint64(entry[metaChecksumSize:]))
	if !ok || header > c.size || uint64(len(entry)) < header || uint64(len(entry))-header > c.size-header {
		return false
	}
	tail := entry[header:]
	copy(image, entry[:header])
	copy(image[c.size-uint64(len(tail)):], tail)
	return true
}

// save keeps the header (and the tail, when present in the image) as the entry; failing
// to cache is not an error.
func (c *headerCache) save(image []byte) {
	if c.store == nil {
		return
	}
	header, ok := headerSize(le.Uint64(image[metaChecksumSize:]))
	if !ok || header > c.size {
		return
	}
	entry := append([]byte(nil), image[:header]...)
	f := &dataFile{data: image, size: c.size}
	if off, end, ok := f.tailSpan(header); ok {
		entry = append(entry, image[off:end]...)
	}
	c.store.Save(c.entry, entry, c.stats)
}

// MaxText bounds a small document fetched whole (a dataset's spec.json), and the copy of
// it that the cache directory keeps.
const MaxText = 16 << 20

// A small document fetched whole (a dataset's spec.json) is remembered in the cache
// directory, keyed by URL alone (source.TextEntry): the last copy seen, which may no longer
// be the object's. It is a guess of what the next fetch returns, so that a reader can
// start what depends on it (opening a dataset's field files, a round trip each) while that
// fetch is under way; the fetch confirms or refutes it, and a refuted guess is thrown
// away. A copy damaged or replaced on disk is no copy.

// textStore is the store of opts' cache directory, or nil: none, or one refused (the
// reader that opens the dataset says why).
func textStore(opts remote.Options) *source.Store {
	if opts.CacheDir == "" {
		return nil
	}
	store, err := source.OpenStore(opts.CacheDir, opts.CacheLimit)
	if err != nil {
		return nil
	}
	return store
}

// RememberText keeps data as the last copy seen of the document at url in the cache
// directory of opts (none: nothing is kept; nor is a document over MaxText).
func RememberText(opts remote.Options, url string, data []byte) {
	if store := textStore(opts); store != nil && len(data) <= MaxText {
		store.Save(source.TextEntry(url), data, nil)
	}
}

// RememberedText is the last copy of the document at url that RememberText kept in the
// cache directory of opts.
func RememberedText(opts remote.Options, url string) ([]byte, bool) {
	store := textStore(opts)
	if store == nil {
		return nil, false
	}
	return store.Load(source.TextEntry(url), MaxText)
}
