package core

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ffrecord/ffrecord/core/remote"
	"github.com/ffrecord/ffrecord/core/source"
	"golang.org/x/sys/unix"
)

// A header entry that is not the object's header whole (a byte flipped in its offsets, cut
// short, another object's, the older layout's, a FIFO, a symlink to /dev/zero) is a miss:
// the header is fetched again and the entry rewritten, with checks on (never blamed on the
// intact object) or off (never samples of wrong sizes), and nothing hangs.
func TestHeaderEntriesThatAreNotTheHeaderAreMisses(t *testing.T) {
	dir := t.TempDir()
	samples := [][]byte{bytes.Repeat([]byte{1}, 1000), bytes.Repeat([]byte{2}, 1000), bytes.Repeat([]byte{3}, 1000)}
	writeSamples(t, filepath.Join(dir, "h.ffr"), samples, WriterOptions{})
	writeSamples(t, filepath.Join(dir, "other.ffr"), [][]byte{[]byte("a"), []byte("b"), []byte("c")}, WriterOptions{})
	srv := newFileServer(t, dir)
	offsetOfSample1 := int(offsetPos(3, 1)) // in the entry as in the file
	for _, c := range []struct {
		name   string
		change func(t *testing.T, entry, other string)
	}{
		{"an offset's byte flipped", func(t *testing.T, entry, _ string) { flipFileByte(t, entry, offsetOfSample1) }},
		{"the seal's byte flipped", func(t *testing.T, entry, _ string) { flipFileByte(t, entry, -20) }},
		{"cut short", func(t *testing.T, entry, _ string) { truncateFile(t, entry, 30) }},
		{"another object's", func(t *testing.T, entry, other string) { renameOver(t, other, entry) }},
		{"older layout", func(t *testing.T, entry, _ string) { truncateFile(t, entry, -44) }},
		{"FIFO", func(t *testing.T, entry, _ string) {
			replaceWith(t, entry, func() error { return unix.Mkfifo(entry, 0o600) })
		}},
		{"symlink to /dev/zero", func(t *testing.T, entry, _ string) {
			replaceWith(t, entry, func() error { return os.Symlink("/dev/zero", entry) })
		}},
	} {
		for _, check := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, check %v", c.name, check), func(t *testing.T) {
				opts := ReaderOptions{CheckData: check, Remote: remote.Options{CacheDir: t.TempDir(), Concurrency: 4}}
				openReader(t, opts, srv.URL+"/other.ffr")
				other := headerEntries(t, opts.Remote.CacheDir)
				openReader(t, opts, srv.URL+"/h.ffr")
				entry := headerEntries(t, opts.Remote.CacheDir)
				if len(other) != 1 || len(entry) != 2 {
					t.Fatalf("entries %v, then %v", other, entry)
				}
				mine := entry[0]
				if mine == other[0] {
					mine = entry[1]
				}
				c.change(t, mine, other[0])
				before := srv.gets.Load()
				opened := make(chan *Reader)
				go func() {
					r, err := Open([]string{srv.URL + "/h.ffr"}, opts)
					if err != nil {
						t.Error(err)
					}
					opened <- r
				}()
				var r *Reader
				select {
				case r = <-opened:
				case <-time.After(10 * time.Second):
					t.Fatal("opening hangs on a header entry")
				}
				if r == nil {
					return
				}
				defer r.Close()
				assertSamples(t, readAll(t, r), samples)
				if srv.gets.Load() == before {
					t.Fatal("the header was not fetched again")
				}
				if info, err := os.Lstat(mine); err != nil || !info.Mode().IsRegular() {
					t.Fatalf("the entry was not rewritten: %v %v", info, err)
				}
			})
		}
	}
}

// A cache directory that another user could write into is refused when a remote file is
// opened with it, naming it: its planted headers and chunks are never read.
func TestRemoteOpenRefusesACacheDirectoryOthersCanWrite(t *testing.T) {
	dir := t.TempDir()
	writeSamples(t, filepath.Join(dir, "p.ffr"), [][]byte{[]byte("x")}, WriterOptions{})
	srv := newFileServer(t, dir)
	cache := filepath.Join(t.TempDir(), "shared")
	opts := ReaderOptions{CheckData: true, Remote: remote.Options{CacheDir: cache, Concurrency: 4}}
	openReader(t, opts, srv.URL+"/p.ffr")
	if err := os.Chmod(cache, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := Open([]string{srv.URL + "/p.ffr"}, opts)
	if !errors.Is(err, source.ErrCache) || !errors.Is(err, syscall.EACCES) || !strings.Contains(err.Error(), cache+" is writable by all users") {
		t.Fatalf("open with a cache directory of mode 0777: %v", err)
	}
}

func headerEntries(t *testing.T, dir string) []string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join(dir, "*.ffrh"))
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// flipFileByte flips the byte at position at of a file (from its end when negative).
func flipFileByte(t *testing.T, path string, at int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if at < 0 {
		at += len(data)
	}
	data[at] ^= 0xFF
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// truncateFile cuts a file to size bytes (when negative, that many fewer than it has).
func truncateFile(t *testing.T, path string, size int64) {
	t.Helper()
	if size < 0 {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		size += info.Size()
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func renameOver(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func replaceWith(t *testing.T, path string, make func() error) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := make(); err != nil {
		t.Fatal(err)
	}
}
