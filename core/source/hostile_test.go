package source

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/crc32"
	"golang.org/x/sys/unix"
)

// A cache directory another user could write into is refused, naming it and why, whatever
// it holds; so is a chunks subdirectory of the kind. The check is made at every open: a
// directory opened to others since it was last used is refused too.
func TestCacheDirectoryOthersCanWriteIsRefused(t *testing.T) {
	for _, c := range []struct {
		name, why string
		set       func(t *testing.T, root string)
	}{
		{"writable by all", "is writable by all users (mode 0777)", func(t *testing.T, root string) { chmod(t, root, 0o777) }},
		{"sticky and writable by all", "is writable by all users (mode 1777)", func(t *testing.T, root string) {
			chmod(t, root, 0o777|os.ModeSticky)
		}},
		{"writable by its group", "is writable by its group (mode 0770)", func(t *testing.T, root string) { chmod(t, root, 0o770) }},
		{"chunks writable by all", "is writable by all users (mode 0777)", func(t *testing.T, root string) {
			chmod(t, filepath.Join(root, "chunks"), 0o777)
		}},
		{"chunks a symlink", "is not a directory but a symlink", func(t *testing.T, root string) {
			chunks := filepath.Join(root, "chunks")
			if err := os.RemoveAll(chunks); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(t.TempDir(), chunks); err != nil {
				t.Fatal(err)
			}
		}},
		{"another user's", "belongs to uid", func(t *testing.T, root string) { chownToOther(t, root) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "cache")
			obj := newObject(20_100, "v1")
			first, _ := cachedOver(t, obj, root, 0, 10_000)
			readAll(t, first) // chunks and the store cached in this process: refused all the same
			c.set(t, root)
			_, err := OpenStore(root, 0)
			if !errors.Is(err, ErrCache) || !errors.Is(err, syscall.EACCES) ||
				!strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), root) {
				t.Fatalf("OpenStore: %v, want ErrCache and EACCES naming %s and %q", err, root, c.why)
			}
		})
	}
}

// An owner check that runs as any user: root can give the directory away, others find one
// that is not theirs.
func chownToOther(t *testing.T, root string) {
	if os.Geteuid() == 0 {
		if err := os.Chown(root, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", root); err != nil { // root's, not this user's
		t.Fatal(err)
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// The cache creates its directories for its user alone.
func TestNewCacheDirectoriesArePrivate(t *testing.T) {
	old := unix.Umask(0)
	defer unix.Umask(old)
	root := filepath.Join(t.TempDir(), "a", "cache")
	if _, err := OpenStore(root, 0); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Dir(root), root, filepath.Join(root, "chunks")} {
		info, err := os.Stat(dir)
		if err != nil || info.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v, want mode 0700", dir, info.Mode(), err)
		}
	}
}

// A chunk file that is not the chunk its name says is never served, whether the reader
// checks sample CRCs (and skips the chunk's own) or not: its seal binds it to the object,
// version and byte range. It is deleted and downloaded again.
func TestChunkFilesThatAreNotTheirChunkAreNeverServed(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, path, other string) // other: another chunk's file
	}{
		{"another chunk's copy", func(t *testing.T, path, other string) { copyFile(t, other, path) }},
		{"old layout (CRC-32 and magic only)", func(t *testing.T, path, _ string) {
			data := readFile(t, path)[:10_000]
			sum := crc32.ChecksumIEEE(data)
			old := append(data, byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24))
			writeFile(t, path, append(old, "ffrchunk"...))
		}},
		{"seal damaged", func(t *testing.T, path, _ string) { flipByte(t, path, 10_000+3) }},
		{"planted bytes of the right size", func(t *testing.T, path, _ string) {
			writeFile(t, path, bytes.Repeat([]byte{7}, 10_000+sealSize))
		}},
		{"cut short", func(t *testing.T, path, _ string) { writeFile(t, path, readFile(t, path)[:5_000]) }},
	} {
		for _, samplesChecked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, samples checked %v", c.name, samplesChecked), func(t *testing.T) {
				dir := t.TempDir()
				obj := newObject(30_100, "v1")
				first, _ := cachedOver(t, obj, dir, 0, 10_000)
				readAll(t, first)
				if err := first.Close(); err != nil { // its mappings released: files changed in place
					t.Fatal(err)
				}
				path := filepath.Join(dir, "chunks", first.chunkName(1))
				c.change(t, path, filepath.Join(dir, "chunks", first.chunkName(2)))
				again, stats := cachedOver(t, obj, dir, 0, 10_000)
				again.SamplesChecked = samplesChecked
				if got := readAll(t, again); !bytes.Equal(got, obj.data) {
					t.Fatal("a chunk file that is not its chunk was served")
				}
				if stats.Misses.Load() != 1 {
					t.Fatalf("%d misses, want the changed chunk downloaded again", stats.Misses.Load())
				}
				if third, _ := cachedOver(t, obj, dir, 0, 10_000); !bytes.Equal(readAll(t, third), obj.data) {
					t.Fatal("the chunk downloaded again is not served right")
				}
			})
		}
	}
}

// A chunk of another version of the object, renamed to this version's name, has that
// version's seal: a miss.
func TestAnotherVersionsChunkUnderThisVersionsName(t *testing.T) {
	dir := t.TempDir()
	older, newer := newObject(30_100, "v1"), newObject(30_100, "v2")
	newer.data[15_000] ^= 0xFF
	a, _ := cachedOver(t, older, dir, 0, 10_000)
	readAll(t, a)
	b, stats := cachedOver(t, newer, dir, 0, 10_000)
	copyFile(t, filepath.Join(dir, "chunks", a.chunkName(1)), filepath.Join(dir, "chunks", b.chunkName(1)))
	b.SamplesChecked = true
	if got := readAll(t, b); !bytes.Equal(got, newer.data) {
		t.Fatal("another version's chunk was served")
	}
	if stats.Misses.Load() != 3 {
		t.Fatalf("%d misses, want 3", stats.Misses.Load())
	}
}

// Anything but a regular file in place of a cache file (a FIFO, a symlink to /dev/zero or
// to a chunk, a directory) is never read nor waited on: the read goes on, the chunk is
// downloaded again in its place.
func TestSpecialFilesInPlaceOfCacheFiles(t *testing.T) {
	for _, c := range []struct {
		name  string
		plant func(t *testing.T, chunks, chunk string)
	}{
		{"FIFO as a chunk", func(t *testing.T, chunks, chunk string) { mkfifo(t, filepath.Join(chunks, chunk)) }},
		{"symlink to /dev/zero as a chunk", func(t *testing.T, chunks, chunk string) {
			symlink(t, "/dev/zero", filepath.Join(chunks, chunk))
		}},
		{"empty directory as a chunk", func(t *testing.T, chunks, chunk string) {
			if err := os.Mkdir(filepath.Join(chunks, chunk), 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"FIFO as a chunk's lock", func(t *testing.T, chunks, chunk string) { mkfifo(t, filepath.Join(chunks, chunk+".lock")) }},
		{"symlink as a chunk's lock", func(t *testing.T, chunks, chunk string) {
			symlink(t, "/dev/null", filepath.Join(chunks, chunk+".lock"))
		}},
		{"FIFO as the eviction lock", func(t *testing.T, chunks, _ string) { mkfifo(t, filepath.Join(chunks, ".evict.lock")) }},
		{"FIFO as a download", func(t *testing.T, chunks, _ string) { mkfifo(t, filepath.Join(chunks, ".tmp-10044-1-1")) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			obj := newObject(30_100, "v1")
			chunks := filepath.Join(dir, "chunks")
			c.plant(t, chunks, mustMkdir(t, chunks, obj).chunkName(1))
			limited, stats := cachedOver(t, obj, dir, 4*(10_000+sealSize), 10_000)
			got := make([]byte, obj.Size())
			done := make(chan error)
			go func() {
				limited.Prefetch([]int64{10_100})
				for limited.prefetching.Load() != 0 {
					time.Sleep(time.Millisecond)
				}
				done <- limited.ReadRanges([]Span{{Off: 0, Buf: got[:100]}, {Off: 100, Buf: got[100:]}})
			}()
			select {
			case err := <-done:
				if err != nil || !bytes.Equal(got, obj.data) {
					t.Fatalf("read: %v, or bytes differ", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the read hangs on a special file in the cache")
			}
			if stats.Misses.Load() != 3 {
				t.Fatalf("%d misses, want the 3 chunks downloaded", stats.Misses.Load())
			}
			info, err := os.Lstat(filepath.Join(chunks, limited.chunkName(1)))
			if err != nil || !info.Mode().IsRegular() {
				t.Fatalf("chunk 1 is not cached in the special file's place: %v %v", info, err)
			}
		})
	}
}

// Lock files exist only while held: a cache that downloaded many chunks holds none, and
// lock files left by dead processes or by the older layout (one per chunk, never deleted)
// are swept by the next download.
func TestLockFilesDoNotAccumulate(t *testing.T) {
	dir := t.TempDir()
	chunks := filepath.Join(dir, "chunks")
	if err := os.MkdirAll(chunks, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range 600 { // what the older layout left: 600 lock files beside 4 chunks
		writeFile(t, filepath.Join(chunks, fmt.Sprintf("%032x-%d-10000.chunk.lock", i, i)), nil)
	}
	writeFile(t, filepath.Join(dir, strings.Repeat("ab", 20)+".ffrh.lock"), nil)
	writeFile(t, filepath.Join(dir, "notes.lock"), nil) // the user's own: left alone
	obj := newObject(100_100, "v1")
	c, _ := cachedOver(t, obj, dir, 4*(10_000+sealSize), 10_000)
	if got := readAll(t, c); !bytes.Equal(got, obj.data) {
		t.Fatal("bytes differ")
	}
	locks, _ := filepath.Glob(filepath.Join(chunks, "*.lock"))
	entryLocks, _ := filepath.Glob(filepath.Join(dir, "*.lock"))
	if len(locks) != 1 || filepath.Base(locks[0]) != ".evict.lock" || len(entryLocks) != 1 {
		t.Fatalf("lock files left: %d in chunks (%v...), %v beside", len(locks), locks[:min(3, len(locks))], entryLocks)
	}
}

// Lock holders exclude each other while each deletes its lock file on release: never two
// at once, and no lock file left.
func TestLocksExcludeWhileTheirFilesAreDeleted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.chunk.lock")
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				l, err := Acquire(path)
				if err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(20 * time.Microsecond) // a holder that works a while
				inside.Add(-1)
				l.Release()
			}
		})
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d holders of one lock at once", most.Load())
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("the lock file is left: %v", err)
	}
}

// Entries are sealed with their key: one damaged, cut short, planted for another key,
// over its bound, left by the older layout (no seal), or not a regular file is a miss, and
// deleted.
func TestEntriesThatAreNotTheirKeysAreMisses(t *testing.T) {
	header := HeaderEntry("http://h/a.ffr", `"e1"`, 5000)
	for _, c := range []struct {
		name   string
		change func(t *testing.T, path string, s *Store)
	}{
		{"a byte flipped", func(t *testing.T, path string, _ *Store) { flipByte(t, path, 7) }},
		{"cut short", func(t *testing.T, path string, _ *Store) { writeFile(t, path, readFile(t, path)[:50]) }},
		{"another object's entry", func(t *testing.T, path string, s *Store) {
			other := HeaderEntry("http://h/b.ffr", `"e1"`, 5000)
			s.Save(other, []byte("someone else's header"), nil)
			copyFile(t, filepath.Join(s.root, other.name), path)
		}},
		{"another version's entry", func(t *testing.T, path string, s *Store) {
			other := HeaderEntry("http://h/a.ffr", `"e2"`, 5000)
			s.Save(other, []byte("the old header"), nil)
			copyFile(t, filepath.Join(s.root, other.name), path)
		}},
		{"older layout", func(t *testing.T, path string, _ *Store) { writeFile(t, path, []byte("the header alone")) }},
		{"FIFO", func(t *testing.T, path string, _ *Store) { remove(t, path); mkfifo(t, path) }},
		{"symlink to /dev/zero", func(t *testing.T, path string, _ *Store) { remove(t, path); symlink(t, "/dev/zero", path) }},
		{"over its bound", func(t *testing.T, path string, s *Store) {
			remove(t, path)
			s.Save(header, bytes.Repeat([]byte{1}, 5001), nil)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := OpenStore(t.TempDir(), 0)
			if err != nil {
				t.Fatal(err)
			}
			want := []byte("the header and the tail")
			s.Save(header, want, nil)
			if got, ok := s.Load(header, 5000); !ok || !bytes.Equal(got, want) {
				t.Fatalf("Load = %q, %v; want what was saved", got, ok)
			}
			path := filepath.Join(s.root, header.name)
			c.change(t, path, s)
			done := make(chan bool)
			go func() { _, ok := s.Load(header, 5000); done <- ok }()
			select {
			case ok := <-done:
				if ok {
					t.Fatal("an entry that is not its key's was used")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("loading an entry hangs")
			}
			if _, err := os.Lstat(path); !os.IsNotExist(err) {
				t.Fatalf("the bad entry was kept: %v", err)
			}
			s.Save(header, want, nil) // fetched again
			if got, ok := s.Load(header, 5000); !ok || !bytes.Equal(got, want) {
				t.Fatalf("Load after saving again = %q, %v", got, ok)
			}
		})
	}
}

// Entries count against the limit with the chunks and are evicted with them, least
// recently used first; the user's own files in the directory are neither.
func TestEntriesCountAgainstTheLimit(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "notes.text"), bytes.Repeat([]byte{1}, 50_000))
	limit := int64(4 * (10_000 + sealSize))
	s, err := OpenStore(dir, limit)
	if err != nil {
		t.Fatal(err)
	}
	var entries []Entry
	for i := range 30 {
		e := TextEntry(fmt.Sprintf("s3://b/%d/spec.json", i))
		s.Save(e, bytes.Repeat([]byte{byte(i)}, 3_000), nil)
		entries = append(entries, e)
	}
	obj := newObject(40_100, "v1")
	c, _ := cachedOver(t, obj, dir, limit, 10_000)
	if got := readAll(t, c); !bytes.Equal(got, obj.data) {
		t.Fatal("bytes differ")
	}
	var used int64
	for _, pattern := range []string{"chunks/*.chunk", "*.text", "*.ffrh"} {
		found, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, f := range found {
			if filepath.Base(f) != "notes.text" {
				used += fileSize(t, f)
			}
		}
	}
	if used > limit {
		t.Fatalf("%d bytes of chunks and entries over the limit of %d", used, limit)
	}
	if fileSize(t, filepath.Join(dir, "notes.text")) != 50_000 {
		t.Fatal("the user's file was evicted")
	}
	if _, ok := s.Load(entries[0], 3_000); ok {
		t.Fatal("the least recently used entry outlived chunks used since")
	}
}

// mustMkdir makes the store's directories in dir and returns a reader of obj through it
// (for its chunks' names), closed.
func mustMkdir(t *testing.T, chunks string, obj *memSource) *Cached {
	t.Helper()
	c, _ := cachedOver(t, obj, filepath.Dir(chunks), 0, 10_000)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return c
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	writeFile(t, to+".new", readFile(t, from))
	if err := os.Rename(to+".new", to); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, at int) {
	t.Helper()
	data := readFile(t, path)
	data[at] ^= 0xFF
	writeFile(t, path, data)
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}
