package core

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/ffrecord/ffrecord/core/remote"
)

// statOf is the counter name of Stats.
func statOf(t *testing.T, r *Reader, name string) int64 {
	t.Helper()
	k := slices.Index(StatNames, name)
	if k < 0 {
		t.Fatalf("no counter %q in %v", name, StatNames)
	}
	return r.Stats()[k]
}

func TestRemoteStatsWeighBytesFetchedAgainstDelivered(t *testing.T) {
	dir := t.TempDir()
	samples := make([][]byte, 6000) // a header of 72 KB: more than the first request asks for
	for i := range samples {
		samples[i] = []byte{byte(i), byte(i >> 8), 1, 2, 3}
	}
	writeSamples(t, filepath.Join(dir, "d.ffr"), samples, WriterOptions{})
	srv := newFileServer(t, dir)
	r := openReader(t, ReaderOptions{CheckData: true}, srv.URL+"/d.ffr")
	info, err := r.FileInfo(0)
	if err != nil {
		t.Fatal(err)
	}
	if info.ReadFrom != ReadRemote {
		t.Fatalf("read from %d, want ReadRemote", info.ReadFrom)
	}
	// Without a cache nothing past the header is fetched at open (every process opens the
	// file in every epoch): its first 64 KiB, then the rest of it.
	if got, gets := statOf(t, r, "bytes_fetched"), srv.gets.Load(); uint64(got) > max(info.HeaderBytes, uncachedFirstFetch) || gets != 2 {
		t.Fatalf("opening fetched %d bytes in %d GETs; the header is %d bytes", got, gets, info.HeaderBytes)
	}
	if d := statOf(t, r, "bytes_delivered"); d != 0 {
		t.Fatalf("%d bytes delivered before any read", d)
	}
	opened := statOf(t, r, "bytes_fetched")
	// Samples 2,000 apart: no gap read through.
	if err := r.ReadBatch([]uint64{5, 4000, 2000}, make([]byte, 15), make([]uint64, 3)); err != nil {
		t.Fatal(err)
	}
	if d, f := statOf(t, r, "bytes_delivered"), statOf(t, r, "bytes_fetched")-opened; d != 15 || f != 15 {
		t.Fatalf("3 samples of 5 bytes: %d delivered, %d fetched", d, f)
	}
	local := openReader(t, ReaderOptions{}, filepath.Join(dir, "d.ffr"))
	if info, _ := local.FileInfo(0); info.ReadFrom != ReadLocal {
		t.Fatalf("a local file reads from %d", info.ReadFrom)
	}
	cached := openReader(t, ReaderOptions{Remote: remote.Options{CacheDir: t.TempDir()}}, srv.URL+"/d.ffr")
	if info, _ := cached.FileInfo(0); info.ReadFrom != ReadCached {
		t.Fatalf("a file under a cache reads from %d", info.ReadFrom)
	}
}
