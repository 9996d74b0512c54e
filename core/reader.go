package core

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ffrecord/ffrecord/core/internal/parallel"
	"github.com/ffrecord/ffrecord/core/remote"
	"github.com/ffrecord/ffrecord/core/source"
)

// ReaderOptions tune a Reader.
type ReaderOptions struct {
	// CheckData validates each file's metadata checksum and offsets at Open and every
	// sample's CRC-32 as it is read.
	CheckData bool
	// Direct reads sample data with O_DIRECT, bypassing the page cache, through the batch
	// engine.
	Direct bool
	// Verified are identities of files whose metadata another process checked (Reader.Verified
	// there): with CheckData, a file whose identity at Open is one of them is not checked
	// again; a file that changed in any way has another identity, and is.
	Verified []FileIdentity
	// Remote configures access to files named by s3://, http:// and https:// URLs.
	Remote remote.Options
	// NoDescriptors asks that local files hold no descriptor once opened and checked, so
	// that a process can keep thousands of files open within a small RLIMIT_NOFILE: their
	// samples are then copied from their mappings, which keep the opened version of each
	// file readable (see dropDescriptor for the files that keep theirs).
	NoDescriptors bool
}

// Reader reads samples from one or more FFRecord files as one dataset. It is safe for
// concurrent use.
type Reader struct {
	// What every read looks at first, in the first two of the struct's nine cache lines
	// (opts begins with CheckData and Direct): a batch across a thousand readers (a
	// mixture's members) finds most of them out of the CPU's caches, and paid a miss for
	// each of five lines of each reader when these lay apart.
	mu     sync.RWMutex // held for reading by every call, for writing by Close
	closed bool
	remote bool // some file is read over the network
	window mappedWindow
	files  []*dataFile
	starts []uint64 // starts[k] is the global index of file k's first sample; one extra: Len
	// length and first are Len and files[0], kept here too: reaching them through the
	// slices costs a miss more each.
	length uint64
	first  *dataFile
	opts   ReaderOptions

	warnings []string
	stats    source.Stats
	// delivered counts the stored bytes of remote files' samples read, against which
	// stats.Bytes (what the store sent) shows what reading over the network costs.
	delivered atomic.Int64

	metadataChecks sync.Map     // file index -> metadataResult, by metadataError
	warm           warmBlocks   // what reads copy from the mappings past mappedBudget
	prefetching    atomic.Int32 // Prefetch goroutines running
	// residentBatches counts the batches in a row found in the page cache (see resident).
	residentBatches atomic.Uint64
}

// filesAtOnce bounds the remote files a reader opens at once.
const filesAtOnce = 16

// Open opens paths as one dataset, in the order given. A directory stands for its *.ffr
// files sorted by name.
func Open(paths []string, opts ReaderOptions) (*Reader, error) {
	names, err := expandPaths(paths, opts.Remote)
	if err != nil {
		return nil, err
	}
	r := &Reader{opts: opts, starts: make([]uint64, 1, len(names)+1)}
	files, warnings, errs := make([]*dataFile, len(names)), make([][]string, len(names)), make([]error, len(names))
	// Remote files open a few at once: each open waits a round trip or two (the object's
	// version, its header), which a dump of many parts would otherwise wait file after
	// file. Files are handed out in order, so every file before a failed one was tried,
	// and the error reported is the first file's to fail, as when opened one by one.
	helpers := 0
	if slices.ContainsFunc(names, remote.IsURL) {
		helpers = filesAtOnce - 1
	}
	var mappedOnly atomic.Uint64 // bytes of the files that gave up their descriptor
	_ = parallel.Each(len(names), parallel.UpTo(helpers), func() {}, func(k int) error {
		files[k], warnings[k], errs[k] = openFile(names[k], opts, &r.stats, k == 0)
		if errs[k] == nil && opts.NoDescriptors && !opts.Direct {
			files[k].dropDescriptor(&mappedOnly)
		}
		return errs[k]
	})
	if failed := slices.IndexFunc(errs, func(err error) bool { return err != nil }); failed >= 0 {
		for _, f := range files {
			if f != nil {
				r.files = append(r.files, f)
			}
		}
		r.closeFiles()
		return nil, errs[failed]
	}
	for k, f := range files {
		r.files = append(r.files, f)
		r.remote = r.remote || f.remote != nil
		r.warnings = append(r.warnings, warnings[k]...)
		r.starts = append(r.starts, r.starts[len(r.starts)-1]+f.samples())
	}
	var data, header uint64
	for _, f := range r.files {
		data += f.size - f.header
		header += f.header
	}
	r.window.streamData, r.window.boundHeaders = data > mappedBudget, header > mappedBudget
	r.length = r.starts[len(r.starts)-1]
	if len(r.files) > 0 {
		r.first = r.files[0]
	}
	return r, nil
}

// expandPaths replaces each directory (or s3:// prefix) by its *.ffr files in name order
// (DatasetFiles), and each file:// URL by its path.
func expandPaths(paths []string, opts remote.Options) ([]string, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: no path given", ErrInvalid)
	}
	var names []string
	for _, p := range paths {
		if err := checkPath(p); err != nil {
			return nil, err
		}
		local, kind, err := remote.Locate(p)
		if kind != remote.KindLocal {
			urls, err := expandURL(p, opts)
			if err != nil {
				return nil, err
			}
			names = append(names, urls...)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		p = local
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			names = append(names, p)
			continue
		}
		files, err := DatasetFiles(p)
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, errorf(p, -1, ErrInvalid, "directory holds no *.ffr file")
		}
		names = append(names, files...)
	}
	return names, nil
}

// checkPath refuses a path holding a NUL byte: the system would see it cut short at the
// NUL, and open another file than the one named. The path is quoted, as a message carrying
// the NUL would be cut short in turn by whoever reads it as a C string.
func checkPath(path string) error {
	if strings.IndexByte(path, 0) >= 0 {
		return fmt.Errorf("%w: path %q contains a NUL byte", ErrInvalid, path)
	}
	return nil
}

// Len is the number of samples in the dataset.
func (r *Reader) Len() uint64 { return r.length }

// Files are the files of the dataset, directories expanded.
func (r *Reader) Files() []string {
	names := make([]string, len(r.files))
	for k, f := range r.files {
		names[k] = f.path
	}
	return names
}

// FileCounts is the number of samples in each file.
func (r *Reader) FileCounts() []uint64 {
	counts := make([]uint64, len(r.files))
	for k := range r.files {
		counts[k] = r.starts[k+1] - r.starts[k]
	}
	return counts
}

// Warnings are the notices raised at Open, such as files whose metadata checksum is 0.
func (r *Reader) Warnings() []string { return append([]string(nil), r.warnings...) }

// Versions are the size and ETag of each remote file, by URL, as this reader opened them
// (files whose store gives no ETag are left out): handed to another reader as
// remote.Options.Versions, they pin its files to the same versions, and spare it a request
// per file at open.
func (r *Reader) Versions() map[string]remote.Version {
	out := map[string]remote.Version{}
	for _, f := range r.files {
		if f.remote != nil && f.remote.src.Version() != "" {
			out[f.path] = remote.Version{Size: f.remote.src.Size(), ETag: f.remote.src.Version()}
		}
	}
	return out
}

// locate maps a global index to its file and the index within that file.
func (r *Reader) locate(index uint64) (int, uint64, error) {
	if index >= r.Len() {
		return 0, 0, fmt.Errorf("%w: sample %d of a dataset of %d", ErrIndex, index, r.Len())
	}
	if len(r.files) == 1 {
		return 0, index, nil
	}
	k := sort.Search(len(r.files), func(k int) bool { return r.starts[k+1] > index })
	return k, index - r.starts[k], nil
}

// acquire takes the read side of the close lock; callers release it with r.mu.RUnlock.
func (r *Reader) acquire() error {
	r.mu.RLock()
	if r.closed {
		r.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// Sizes sets sizes[k] to the size of sample indices[k] as ReadBatch returns it.
func (r *Reader) Sizes(indices, sizes []uint64) error {
	if len(sizes) < len(indices) {
		return fmt.Errorf("%w: %d sizes for %d indices", ErrInvalid, len(sizes), len(indices))
	}
	if err := r.acquire(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	return r.sizesHeld(indices, sizes)
}

// sizesHeld is Sizes for a caller that holds the reader (acquire).
func (r *Reader) sizesHeld(indices, sizes []uint64) error {
	it := new(batchItem)
	return withFaultGuard(faultAt(&it, r.files[0].path), func() error {
		for k, index := range indices {
			fk, local, err := r.locate(index)
			if err != nil {
				return err
			}
			if err := r.plan(it, r.files[fk], local, r.starts[fk]); err != nil {
				return err
			}
			sizes[k] = it.size
		}
		return nil
	})
}

// Close releases the files. Calls after the first return nil and do nothing.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.closeFiles()
	return nil
}

func (r *Reader) closeFiles() {
	for _, f := range r.files {
		f.close()
	}
}

// String describes the reader for logs.
func (r *Reader) String() string {
	return fmt.Sprintf("core.Reader(%d samples in %d files)", r.Len(), len(r.files))
}

// sampleError adds the dataset-wide index to a per-file error when it differs from the
// index within the file, so a message names the sample both ways.
func sampleError(err error, global, local uint64) error {
	var fe *fileError
	if global == local || !errors.As(err, &fe) {
		return err
	}
	return &fileError{path: fe.path, index: fe.index,
		err: fmt.Errorf("%w (sample %d of the dataset)", fe.err, global)}
}
