package core

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ffrecord/ffrecord/core/remote"
	"golang.org/x/sys/unix"
)

func TestRememberedTextIsTheLastCopyKeptPerURL(t *testing.T) {
	opts := remote.Options{CacheDir: t.TempDir()}
	if _, ok := RememberedText(opts, "s3://b/ds/spec.json"); ok {
		t.Fatal("a copy found before any was kept")
	}
	RememberText(opts, "s3://b/ds/spec.json", []byte("v1"))
	RememberText(opts, "s3://b/other/spec.json", []byte("other"))
	RememberText(opts, "s3://b/ds/spec.json", []byte("v2"))
	if got, ok := RememberedText(opts, "s3://b/ds/spec.json"); !ok || !bytes.Equal(got, []byte("v2")) {
		t.Fatalf("got %q, %v; want the last copy kept, v2", got, ok)
	}
	RememberText(remote.Options{}, "s3://b/ds/spec.json", []byte("v3")) // no cache directory: nothing kept
	if _, ok := RememberedText(remote.Options{}, "s3://b/ds/spec.json"); ok {
		t.Fatal("a copy found without a cache directory")
	}
}

// A remembered copy that is not the last one kept whole (a byte flipped, cut short, another
// URL's copy, the older layout's bare text, a FIFO, a symlink to /dev/zero, a file over
// MaxText) is no copy: never used, never waited on, never read past its bound.
func TestRememberedTextDamagedOrReplacedIsNoCopy(t *testing.T) {
	const url = "s3://b/ds/spec.json"
	for _, c := range []struct {
		name   string
		change func(t *testing.T, path string, opts remote.Options)
	}{
		{"a byte flipped", func(t *testing.T, path string, _ remote.Options) { flipFileByte(t, path, 3) }},
		{"cut short", func(t *testing.T, path string, _ remote.Options) { truncateFile(t, path, 10) }},
		{"another URL's copy", func(t *testing.T, path string, opts remote.Options) {
			RememberText(opts, "s3://b/other/spec.json", []byte(`{"other": 1}`))
			others, _ := filepath.Glob(filepath.Join(opts.CacheDir, "*.text"))
			for _, o := range others {
				if o != path {
					renameOver(t, o, path)
				}
			}
		}},
		{"older layout", func(t *testing.T, path string, _ remote.Options) {
			if err := os.WriteFile(path, []byte(`{"x": "int"}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"FIFO", func(t *testing.T, path string, _ remote.Options) {
			replaceWith(t, path, func() error { return unix.Mkfifo(path, 0o600) })
		}},
		{"symlink to /dev/zero", func(t *testing.T, path string, _ remote.Options) {
			replaceWith(t, path, func() error { return os.Symlink("/dev/zero", path) })
		}},
		{"over MaxText", func(t *testing.T, path string, _ remote.Options) { truncateFile(t, path, MaxText+100) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := remote.Options{CacheDir: t.TempDir()}
			RememberText(opts, url, []byte(`{"x": "float"}`))
			kept, _ := filepath.Glob(filepath.Join(opts.CacheDir, "*.text"))
			if len(kept) != 1 {
				t.Fatalf("copies kept: %v", kept)
			}
			c.change(t, kept[0], opts)
			done := make(chan bool)
			go func() { _, ok := RememberedText(opts, url); done <- ok }()
			select {
			case ok := <-done:
				if ok {
					t.Fatal("a copy that is not the one kept was used")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("reading the kept copy hangs")
			}
		})
	}
	opts := remote.Options{CacheDir: t.TempDir()}
	RememberText(opts, url, make([]byte, MaxText+1))
	if _, ok := RememberedText(opts, url); ok {
		t.Fatal("a document over MaxText was kept")
	}
}
