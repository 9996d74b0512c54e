package source

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// memSource is an object in memory with a version, counting the requests it serves.
type memSource struct {
	data     []byte
	version  string
	requests atomic.Int64
}

func (m *memSource) Name() string    { return "mem://object" }
func (m *memSource) Size() int64     { return int64(len(m.data)) }
func (m *memSource) Version() string { return m.version }
func (m *memSource) Close() error    { return nil }
func (m *memSource) ReadRanges(spans []Span) error {
	for _, s := range spans {
		m.requests.Add(1)
		copy(s.Buf, m.data[s.Off:])
	}
	return nil
}

func newObject(n int, version string) *memSource {
	data := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	return &memSource{data: data, version: version}
}

// evenBounds cuts [from, size) into chunks of step bytes.
func evenBounds(from, size, step int64) []int64 {
	var b []int64
	for off := from; off < size; off += step {
		b = append(b, off)
	}
	return append(b, size)
}

// readAll reads the object through src in spans of 1000 bytes, in a scrambled order.
func readAll(t *testing.T, src Source) []byte {
	t.Helper()
	out := make([]byte, src.Size())
	var spans []Span
	for off := int64(0); off < src.Size(); off += 1000 {
		spans = append(spans, Span{Off: off, Buf: out[off:min(src.Size(), off+1000)]})
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
	if err := src.ReadRanges(spans); err != nil {
		t.Fatal(err)
	}
	return out
}

func cachedOver(t *testing.T, src Source, dir string, limit, step int64) (*Cached, *Stats) {
	t.Helper()
	store, err := OpenStore(dir, limit)
	if err != nil {
		t.Fatal(err)
	}
	stats := new(Stats)
	c, err := NewCached(src, store, evenBounds(100, src.Size(), step), stats)
	if err != nil {
		t.Fatal(err)
	}
	return c, stats
}

func chunkFiles(t *testing.T, dir string) []string {
	t.Helper()
	found, _ := filepath.Glob(filepath.Join(dir, "chunks", "*.chunk"))
	return found
}

func TestCacheServesChunksOnceAndSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	obj := newObject(50_000, "v1")
	c, stats := cachedOver(t, obj, dir, 0, 8_000)
	if got := readAll(t, c); !bytes.Equal(got, obj.data) {
		t.Fatal("bytes read through the cache differ")
	}
	// 7 chunks, one request each, and the 100 header bytes outside every chunk.
	if got := obj.requests.Load(); got != 7+1 {
		t.Fatalf("%d requests, want 8", got)
	}
	if stats.Misses.Load() != 7 || len(chunkFiles(t, dir)) != 7 {
		t.Fatalf("misses %d, files %d", stats.Misses.Load(), len(chunkFiles(t, dir)))
	}
	// Another reader (as after a restart) reads every chunk from disk.
	again, stats2 := cachedOver(t, obj, dir, 0, 8_000)
	obj.requests.Store(0)
	if got := readAll(t, again); !bytes.Equal(got, obj.data) {
		t.Fatal("bytes read back from the cache differ")
	}
	if obj.requests.Load() != 1 || stats2.Hits.Load() != 7 || stats2.Misses.Load() != 0 {
		t.Fatalf("requests %d hits %d misses %d", obj.requests.Load(), stats2.Hits.Load(), stats2.Misses.Load())
	}
}

func TestReadOverCachedAndMissingChunks(t *testing.T) {
	// A read whose spans lie in chunks cached (served from disk by the caller) and chunks
	// not (downloaded, a few at once) fills every span, each chunk downloaded once.
	dir := t.TempDir()
	obj := newObject(40_100, "v1")
	c, _ := cachedOver(t, obj, dir, 0, 4_000) // 10 chunks after 100 header bytes
	for _, off := range []int64{100, 8_100, 20_100} {
		if err := c.ReadRanges([]Span{{Off: off, Buf: make([]byte, 10)}}); err != nil {
			t.Fatal(err)
		}
	}
	again, stats := cachedOver(t, obj, dir, 0, 4_000)
	obj.requests.Store(0)
	if got := readAll(t, again); !bytes.Equal(got, obj.data) {
		t.Fatal("bytes read over cached and missing chunks differ")
	}
	if stats.Hits.Load() != 3 || stats.Misses.Load() != 7 || obj.requests.Load() != 7+1 {
		t.Fatalf("hits %d misses %d requests %d, want 3, 7 and 8", stats.Hits.Load(), stats.Misses.Load(), obj.requests.Load())
	}
}

func TestCacheKeysByVersion(t *testing.T) {
	dir := t.TempDir()
	old := newObject(20_000, "v1")
	c, _ := cachedOver(t, old, dir, 0, 4_000)
	readAll(t, c)
	replaced := newObject(20_000, "v2")
	replaced.data[5_000] ^= 1
	c2, stats := cachedOver(t, replaced, dir, 0, 4_000)
	if got := readAll(t, c2); !bytes.Equal(got, replaced.data) {
		t.Fatal("a replaced object was served its old bytes")
	}
	if stats.Hits.Load() != 0 {
		t.Fatalf("%d hits on another version's chunks", stats.Hits.Load())
	}
}

func TestCacheEvictsToItsLimitAndRefusesTooSmallOne(t *testing.T) {
	dir := t.TempDir()
	obj := newObject(100_100, "v1")
	limit := int64(3 * (10_000 + sealSize))
	c, stats := cachedOver(t, obj, dir, limit, 10_000)
	if got := readAll(t, c); !bytes.Equal(got, obj.data) {
		t.Fatal("bytes differ")
	}
	var used int64
	for _, f := range chunkFiles(t, dir) {
		info, _ := os.Stat(f)
		used += info.Size()
	}
	// 10 chunks through room for 3: each of the 7 others evicted one, or (when the 3 were
	// downloads under way at once) was served uncached.
	if used > limit || stats.Evictions.Load()+stats.Bypassed.Load() < 7 {
		t.Fatalf("%d bytes cached over a limit of %d, %d evictions, %d uncached", used, limit,
			stats.Evictions.Load(), stats.Bypassed.Load())
	}
	store, _ := OpenStore(dir, 10_000)
	_, err := NewCached(obj, store, evenBounds(100, obj.Size(), 10_000), new(Stats))
	if !errors.Is(err, ErrCacheLimit) || !strings.Contains(err.Error(), "below the 20088 bytes") {
		t.Fatalf("a limit below two chunks: %v", err)
	}
}

func TestTwoLimitsOnOneDirectory(t *testing.T) {
	dir := t.TempDir()
	obj := newObject(80_100, "v1")
	big, _ := cachedOver(t, obj, dir, 0, 10_000)
	readAll(t, big)
	small, _ := cachedOver(t, obj, dir, 3*(10_000+sealSize), 10_000)
	other := newObject(40_100, "other")
	c, _ := cachedOver(t, other, dir, 3*(10_000+sealSize), 10_000)
	if !bytes.Equal(readAll(t, c), other.data) || !bytes.Equal(readAll(t, small), obj.data) {
		t.Fatal("bytes differ")
	}
	if n := len(chunkFiles(t, dir)); n > 3 {
		t.Fatalf("%d chunks left by the job with a limit of 3", n)
	}
	if !bytes.Equal(readAll(t, big), obj.data) {
		t.Fatal("the first job reads wrong bytes after the second one evicted its chunks")
	}
}

func TestChunksInUseAreNotEvicted(t *testing.T) {
	dir := t.TempDir()
	obj := newObject(60_100, "v1")
	limit := int64(2 * (10_000 + sealSize))
	c, stats := cachedOver(t, obj, dir, limit, 10_000)
	readAll(t, c)
	// Lease every cached chunk (the limit's worth), as other processes reading them would.
	leased := chunkFiles(t, dir)
	if len(leased) != 2 {
		t.Fatalf("%d chunks cached under a limit of 2", len(leased))
	}
	for _, f := range leased {
		l, err := LockFile(f, unix.LOCK_SH)
		if err != nil {
			t.Fatal(err)
		}
		defer Unlock(l)
	}
	// Every other chunk cannot be cached now: it is served from memory, no deadlock.
	stats.Bypassed.Store(0)
	for k := range len(c.bounds) - 1 {
		if slices.Contains(leased, filepath.Join(dir, "chunks", c.chunkName(k))) {
			continue
		}
		buf := make([]byte, 10_000)
		if err := c.ReadRanges([]Span{{Off: c.bounds[k], Buf: buf}}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, obj.data[c.bounds[k]:c.bounds[k+1]]) {
			t.Fatal("bytes differ")
		}
	}
	if stats.Bypassed.Load() != 4 {
		t.Fatalf("%d chunks read uncached, want 4", stats.Bypassed.Load())
	}
	for _, f := range leased {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("a chunk in use was evicted: %v", err)
		}
	}
}

func TestDamagedChunkFileIsDownloadedAgain(t *testing.T) {
	dir := t.TempDir()
	obj := newObject(30_100, "v1")
	c, _ := cachedOver(t, obj, dir, 0, 10_000)
	readAll(t, c)
	for _, f := range chunkFiles(t, dir) {
		data, _ := os.ReadFile(f)
		data[10] ^= 0xFF
		if err := os.WriteFile(f+".new", data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f+".new", f); err != nil { // a new inode: not checked yet
			t.Fatal(err)
		}
	}
	c2, stats := cachedOver(t, obj, dir, 0, 10_000)
	if got := readAll(t, c2); !bytes.Equal(got, obj.data) {
		t.Fatal("a damaged chunk file was served")
	}
	if stats.Misses.Load() != 3 {
		t.Fatalf("%d misses, want the 3 damaged chunks downloaded again", stats.Misses.Load())
	}
}

func TestDownloadLeftByADeadProcessIsNeverServed(t *testing.T) {
	dir := t.TempDir()
	obj := newObject(30_100, "v1")
	c, stats := cachedOver(t, obj, dir, int64(3*(10_000+sealSize)), 10_000)
	// A killed process left half a download and the download's lock file (unlocked now).
	name := c.chunkName(0)
	tmp := filepath.Join(dir, "chunks", ".tmp-10012-99999-1")
	if err := os.WriteFile(tmp, obj.data[100:5000], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "chunks", name+".lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, c); !bytes.Equal(got, obj.data) {
		t.Fatal("bytes differ")
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatal("a dead process's download was kept (and counted against the limit)")
	}
	if stats.Evictions.Load() != 0 {
		t.Fatal("a dead download's bytes made the cache evict")
	}
}

func TestFullDiskIsAClearErrorAndLosesNothing(t *testing.T) {
	dir := t.TempDir()
	obj := newObject(30_100, "v1")
	c, _ := cachedOver(t, obj, dir, 0, 10_000)
	if err := c.ReadRanges([]Span{{Off: 100, Buf: make([]byte, 10)}}); err != nil {
		t.Fatal(err)
	}
	saved := writeCacheFile
	writeCacheFile = func(*os.File, []byte) error { return syscall.ENOSPC }
	defer func() { writeCacheFile = saved }()
	err := c.ReadRanges([]Span{{Off: 20_100, Buf: make([]byte, 10)}})
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrCache) || !strings.Contains(err.Error(), "disk is full") {
		t.Fatalf("full disk: %v", err)
	}
	files := chunkFiles(t, dir)
	leftovers, _ := filepath.Glob(filepath.Join(dir, "chunks", ".tmp-*"))
	if len(files) != 1 || len(leftovers) != 0 {
		t.Fatalf("after a full disk: chunks %v, downloads left %v", files, leftovers)
	}
}

func TestReadOnlyCacheDirectoryIsRefusedAtOpen(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a read-only tmpfs here: %v %s", err, out)
	}
	defer func() { _ = exec.Command("umount", mnt).Run() }()
	_, err := OpenStore(filepath.Join(mnt, "cache"), 0)
	if !errors.Is(err, ErrCache) || !errors.Is(err, syscall.EROFS) {
		t.Fatalf("read-only directory: %v", err)
	}
}

func TestPrefetchDownloadsAheadWithinRoom(t *testing.T) {
	dir := t.TempDir()
	obj := newObject(100_100, "v1")
	c, stats := cachedOver(t, obj, dir, int64(5*(10_000+sealSize)), 10_000)
	if n := c.Prefetch([]int64{100, 10_100, 20_100, 30_100, 40_100, 50_100}); n != 3 {
		t.Fatalf("prefetch started %d chunks, room for 3", n)
	}
	for c.prefetching.Load() != 0 {
		runtime.Gosched()
	}
	if stats.Prefetched.Load() != 3 || len(chunkFiles(t, dir)) != 3 {
		t.Fatalf("prefetched %d, cached %d", stats.Prefetched.Load(), len(chunkFiles(t, dir)))
	}
	obj.requests.Store(0)
	buf := make([]byte, 30_000)
	if err := c.ReadRanges([]Span{{Off: 100, Buf: buf}}); err != nil || obj.requests.Load() != 0 {
		t.Fatalf("prefetched chunks were downloaded again: %v, %d requests", err, obj.requests.Load())
	}
}

func TestPrefetchReadsCachedChunksAheadOnce(t *testing.T) {
	dir := t.TempDir()
	obj := newObject(30_100, "v1")
	earlier, _ := cachedOver(t, obj, dir, 0, 10_000)
	readAll(t, earlier)
	c, _ := cachedOver(t, obj, dir, 0, 10_000) // a new reader, of chunks cached already
	obj.requests.Store(0)
	if n := c.Prefetch([]int64{100, 10_100, 10_200}); n != 2 {
		t.Fatalf("prefetch of 2 cached chunks started %d read-aheads", n)
	}
	if n := c.Prefetch([]int64{100, 10_100}); n != 0 {
		t.Fatalf("chunks read ahead already were read ahead again: %d", n)
	}
	if obj.requests.Load() != 0 || c.prefetching.Load() != 0 {
		t.Fatal("a cached chunk was downloaded again")
	}
}

func TestPrefetchWhileAnotherRunsStillReportsMissingChunks(t *testing.T) {
	dir := t.TempDir()
	obj := newObject(30_100, "v1")
	c, stats := cachedOver(t, obj, dir, 0, 10_000)
	c.prefetching.Store(1) // a prefetch under way
	if n := c.Prefetch([]int64{100, 10_100}); n != 2 || obj.requests.Load() != 0 {
		t.Fatalf("a hint of 2 missing chunks while busy: %d (0 means all cached), %d requests", n, obj.requests.Load())
	}
	c.prefetching.Store(0)
	if stats.Prefetched.Load() != 0 {
		t.Fatal("a busy prefetch started downloads")
	}
}

// Chunks lying wholly in a seeded prefix are cached from it and read without a request;
// a chunk cut by the prefix's end is downloaded when read, whole.
func TestSeedCachesTheChunksWhollyInThePrefix(t *testing.T) {
	obj := newObject(10_100, "v1")
	c, stats := cachedOver(t, obj, t.TempDir(), 0, 1000) // chunks [100, 1100), [1100, 2100), ...
	c.Seed(obj.data[:2600])                              // chunks 0 and 1 whole, 2 cut
	if obj.requests.Load() != 0 || stats.Misses.Load() != 2 {
		t.Fatalf("seeding made %d requests and %d misses, want 0 and 2", obj.requests.Load(), stats.Misses.Load())
	}
	got := make([]byte, 2500)
	if err := c.ReadRanges([]Span{{Off: 100, Buf: got[:2000]}}); err != nil || obj.requests.Load() != 0 {
		t.Fatalf("reading the seeded chunks: %v, %d requests", err, obj.requests.Load())
	}
	if err := c.ReadRanges([]Span{{Off: 100, Buf: got}}); err != nil || obj.requests.Load() != 1 {
		t.Fatalf("reading into chunk 2: %v, %d requests, want 1", err, obj.requests.Load())
	}
	if !bytes.Equal(got, obj.data[100:2600]) {
		t.Fatal("seeded chunks serve other bytes than the object's")
	}
	c.Seed(obj.data[:2600]) // cached already: left as they are
	if stats.Misses.Load() != 3 {
		t.Fatalf("%d misses after seeding cached chunks again, want 3", stats.Misses.Load())
	}
}

// A reader holds the chunks it read last (mapped, under their shared lock: not evictable)
// until it closes; a chunk invalidated is dropped at once and downloaded again.
func TestHeldChunksAreReleasedOnCloseAndInvalidate(t *testing.T) {
	dir := t.TempDir()
	obj := newObject(3_100, "v1")
	c, _ := cachedOver(t, obj, dir, 0, 1000) // 3 chunks
	for range 2 {                            // downloaded, served from memory; then read from the cache, and held
		if got := readAll(t, c); !bytes.Equal(got, obj.data) {
			t.Fatal("bytes read through the cache differ")
		}
	}
	evictable := func() int {
		n := 0
		for _, name := range chunkFiles(t, dir) {
			f, err := os.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			if tryLock(f) {
				n++
			}
			_ = f.Close()
		}
		return n
	}
	if n := evictable(); n != 0 {
		t.Fatalf("%d chunks evictable while their reader holds them", n)
	}
	obj.requests.Store(0)
	c.Invalidate(1100, 1101) // chunk 1
	if n := evictable(); n != 0 || len(chunkFiles(t, dir)) != 2 {
		t.Fatalf("after invalidating chunk 1: %d evictable, %d files", n, len(chunkFiles(t, dir)))
	}
	if got := readAll(t, c); !bytes.Equal(got, obj.data) || obj.requests.Load() != 1+1 {
		t.Fatalf("read again: %d requests, want chunk 1 and the header bytes", obj.requests.Load())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := evictable(); n != 3 {
		t.Fatalf("%d of 3 chunks evictable after Close", n)
	}
	// Under a cache limit a reader holds only the chunk it read last.
	limited, _ := cachedOver(t, obj, dir, 10*(1000+sealSize), 1000)
	defer limited.Close()
	if got := readAll(t, limited); !bytes.Equal(got, obj.data) {
		t.Fatal("bytes read through a limited cache differ")
	}
	if n := evictable(); n != 2 {
		t.Fatalf("%d of 3 chunks evictable under a limit, want 2", n)
	}
}
