package core

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ffrecord/ffrecord/core/remote"
)

// fileServer serves a directory over HTTP with Range support and ETags, counting
// requests; damage, when set, may rewrite a response body before it is sent.
type fileServer struct {
	*httptest.Server
	dir  string
	gets atomic.Int64

	mu     sync.Mutex
	damage func(body []byte) []byte
}

func newFileServer(t *testing.T, dir string) *fileServer {
	s := &fileServer{dir: dir}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *fileServer) serve(w http.ResponseWriter, r *http.Request) {
	data, err := os.ReadFile(filepath.Join(s.dir, filepath.FromSlash(r.URL.Path)))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("ETag", fmt.Sprintf(`"%x"`, len(data)))
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		return
	}
	s.gets.Add(1)
	var start, end int
	if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &start, &end); err != nil {
		http.Error(w, "range requests only", 400)
		return
	}
	body := append([]byte(nil), data[start:min(end+1, len(data))]...)
	s.mu.Lock()
	if s.damage != nil {
		body = s.damage(body)
	}
	s.mu.Unlock()
	w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(data)))
	w.Header().Set("Content-Length", fmt.Sprint(end-start+1))
	w.WriteHeader(http.StatusPartialContent)
	_, _ = w.Write(body)
}

func (s *fileServer) setDamage(f func([]byte) []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.damage = f
}

func TestRemoteReadsAreByteExact(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"basic.ffr", "legacy_zero_checksum.ffr", "packed.ffr"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	samples := randomSamples(rng, 300, 5000)
	writeSamples(t, filepath.Join(dir, "lz4.ffr"), samples, WriterOptions{Compression: CompressLZ4})
	srv := newFileServer(t, dir)
	for _, name := range []string{"basic.ffr", "legacy_zero_checksum.ffr", "packed.ffr", "lz4.ffr"} {
		t.Run(name, func(t *testing.T) {
			local := openReader(t, ReaderOptions{CheckData: true}, filepath.Join(dir, name))
			remote := openReader(t, ReaderOptions{CheckData: true}, srv.URL+"/"+name)
			if remote.Len() != local.Len() || len(remote.Warnings()) != len(local.Warnings()) {
				t.Fatalf("remote: %d samples, warnings %q; local: %d, %q",
					remote.Len(), remote.Warnings(), local.Len(), local.Warnings())
			}
			assertSamples(t, readAll(t, remote), readAll(t, local))
			if err := remote.Verify(0, remote.Len(), func(bad BadSample) bool {
				t.Errorf("%+v", bad)
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if remote.Len() < 3 {
				return
			}
			ranges := []Range{{Index: 2, Offset: 1, Length: 2}, {Index: 0, Offset: 0, Length: 0}}
			a, b := make([]byte, 2), make([]byte, 2)
			if err := remote.ReadRanges(ranges, a); err != nil {
				t.Fatal(err)
			}
			if err := local.ReadRanges(ranges, b); err != nil || !bytes.Equal(a, b) {
				t.Fatalf("ranges: remote %x, local %x (%v)", a, b, err)
			}
		})
	}
}

func TestRemoteDatasetOfManyFilesReadsThemTogether(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	var names, urls []string
	srv := newFileServer(t, dir)
	for k := range 5 {
		name := fmt.Sprintf("PART_%05d.ffr", k)
		writeSamples(t, filepath.Join(dir, name), randomSamples(rng, 40, 300), WriterOptions{})
		names, urls = append(names, filepath.Join(dir, name)), append(urls, srv.URL+"/"+name)
	}
	local := openReader(t, ReaderOptions{CheckData: true}, names...)
	remote := openReader(t, ReaderOptions{CheckData: true}, urls...)
	indices := rng.Perm(int(local.Len()))
	batch := make([]uint64, len(indices))
	for i, v := range indices {
		batch[i] = uint64(v)
	}
	got, err := readSamples(remote, batch)
	if err != nil {
		t.Fatal(err)
	}
	want, err := readSamples(local, batch)
	if err != nil {
		t.Fatal(err)
	}
	assertSamples(t, got, want)
}

func TestRemoteDamagedBodyIsRetriedOnceThenReported(t *testing.T) {
	dir := t.TempDir()
	samples := [][]byte{bytes.Repeat([]byte("a"), 100), bytes.Repeat([]byte("b"), 100)}
	writeSamples(t, filepath.Join(dir, "d.ffr"), samples, WriterOptions{})
	srv := newFileServer(t, dir)
	r := openReader(t, ReaderOptions{CheckData: true}, srv.URL+"/d.ffr")

	var damaged atomic.Int64
	flip := func(body []byte) []byte {
		damaged.Add(1)
		body[0] ^= 0xff
		return body
	}
	srv.setDamage(func(body []byte) []byte {
		if damaged.Load() == 0 {
			return flip(body)
		}
		return body
	})
	got, err := readSamples(r, []uint64{1})
	if err != nil || !bytes.Equal(got[0], samples[1]) {
		t.Fatalf("a body damaged once: %v", err)
	}
	srv.setDamage(flip)
	_, err = readSamples(r, []uint64{1})
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), srv.URL+"/d.ffr: sample 1") {
		t.Fatalf("a body always damaged: %v, want ErrChecksum naming the URL and sample", err)
	}
	srv.setDamage(func(body []byte) []byte { return body[:len(body)/2] })
	_, err = readSamples(r, []uint64{0})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "sample 0") || !strings.Contains(err.Error(), "bytes [") {
		t.Fatalf("a body always cut short: %v, want ErrCorrupt naming the sample and byte range", err)
	}
}

func TestRemoteHeaderCacheSavesTheHeaderFetch(t *testing.T) {
	dir := t.TempDir()
	writeSamples(t, filepath.Join(dir, "c.ffr"), [][]byte{[]byte("x"), []byte("yz")}, WriterOptions{})
	srv := newFileServer(t, dir)
	opts := ReaderOptions{CheckData: true, Remote: remote.Options{CacheDir: t.TempDir(), Concurrency: 4}}
	openReader(t, opts, srv.URL+"/c.ffr")
	before := srv.gets.Load()
	r := openReader(t, opts, srv.URL+"/c.ffr")
	if srv.gets.Load() != before {
		t.Fatalf("a cached header was fetched again (%d GETs)", srv.gets.Load()-before)
	}
	assertSamples(t, readAll(t, r), [][]byte{[]byte("x"), []byte("yz")})
}

func TestRemoteMissingObjectIsNotFound(t *testing.T) {
	srv := newFileServer(t, t.TempDir())
	_, err := Open([]string{srv.URL + "/nope.ffr"}, ReaderOptions{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open of a missing object: %v, want not found", err)
	}
	_, err = Open([]string{"ftp://host/a.ffr"}, ReaderOptions{})
	if err == nil {
		t.Fatal("an ftp:// path opened")
	}
}

func TestRemoteOpenCloseLeaksNoGoroutine(t *testing.T) {
	dir := t.TempDir()
	writeSamples(t, filepath.Join(dir, "l.ffr"), [][]byte{[]byte("a"), []byte("b")}, WriterOptions{})
	srv := newFileServer(t, dir)
	cycle := func(n int) {
		for i := range n {
			r, err := Open([]string{srv.URL + "/l.ffr"}, ReaderOptions{CheckData: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := readSamples(r, []uint64{uint64(i % 2)}); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cycle(20)
	remote.CloseIdle()
	before := runtime.NumGoroutine()
	cycle(1000)
	remote.CloseIdle()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // closed connections' goroutines are exiting
	}
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Fatalf("%d goroutines after 1000 open/close cycles, %d before", after, before)
	}
}

func TestRemoteFilesOpenAtOnce(t *testing.T) {
	// A dataset of several remote files waits one round trip for all their opens, not one
	// per file; a file failing to open among them is the error reported.
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	var urls []string
	files := newFileServer(t, dir)
	var inFlight, peak atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
		}
		time.Sleep(50 * time.Millisecond)
		files.serve(w, r)
	}))
	t.Cleanup(srv.Close)
	for k := range 4 {
		name := fmt.Sprintf("part-%d.ffr", k)
		writeSamples(t, filepath.Join(dir, name), randomSamples(rng, 10+k, 100), WriterOptions{})
		urls = append(urls, srv.URL+"/"+name)
	}
	r, err := Open(urls, ReaderOptions{CheckData: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Len() != 10+11+12+13 || peak.Load() < 2 {
		t.Fatalf("%d samples, %d requests at most in flight; want 46 and the files opened at once", r.Len(), peak.Load())
	}
	_, err = Open(append(urls[:2:2], srv.URL+"/missing.ffr", urls[3]), ReaderOptions{})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing.ffr") {
		t.Fatalf("a missing file among several: %v, want fs.ErrNotExist naming it", err)
	}
}
