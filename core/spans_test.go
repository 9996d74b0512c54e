package core

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
)

// readSpan reads samples [start, end) of r with ReadSpan, sizing the buffer by a first call
// that fails with io.ErrShortBuffer (as a caller that does not know the size does), and
// returns them one by one.
func readSpan(r *Reader, start, end uint64) ([][]byte, error) {
	offsets := make([]uint64, end-start+1)
	err := r.ReadSpan(start, end-start, nil, offsets)
	if err != nil && !errors.Is(err, io.ErrShortBuffer) {
		return nil, err
	}
	dst := make([]byte, offsets[end-start])
	if err := r.ReadSpan(start, end-start, dst, offsets); err != nil {
		return nil, err
	}
	out := make([][]byte, end-start)
	for k := range out {
		out[k] = dst[offsets[k]:offsets[k+1]]
	}
	return out, nil
}

// spanFiles writes samples as a dataset of files holding the given counts (a file may hold
// none) and returns their paths.
func spanFiles(t *testing.T, samples [][]byte, counts []int, comp Compression) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	at := 0
	for k, n := range counts {
		path := filepath.Join(dir, fmt.Sprintf("PART_%05d.ffr", k))
		writeSamples(t, path, samples[at:at+n], WriterOptions{Compression: comp})
		paths = append(paths, path)
		at += n
	}
	return paths
}

// Every run of a dataset of several files (empty files and empty samples among them), read
// by ReadSpan, is the samples written: each compression, checks on and off, Direct mode,
// runs within a file and across files.
func TestReadSpanRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 7))
	samples := randomSamples(rng, 23, 300)
	samples[0], samples[5], samples[6], samples[22] = nil, nil, []byte{}, nil
	counts := []int{4, 0, 9, 1, 9}
	for _, comp := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
		paths := spanFiles(t, samples, counts, comp)
		for _, opts := range rangeReaderOptions {
			t.Run(fmt.Sprintf("%v/check=%v/direct=%v", comp, opts.CheckData, opts.Direct), func(t *testing.T) {
				r := openReader(t, opts, paths...)
				for start := range uint64(len(samples)) + 1 {
					for end := start; end <= uint64(len(samples)); end++ {
						got, err := readSpan(r, start, end)
						if err != nil {
							t.Fatalf("[%d, %d): %v", start, end, err)
						}
						assertSamples(t, got, samples[start:end])
					}
				}
			})
		}
	}
}

// A span of a remote dataset reads through the same sources as a batch: the bytes are
// the local files' bytes, checks on.
func TestReadSpanRemote(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 8))
	samples := randomSamples(rng, 40, 2000)
	for _, comp := range []Compression{CompressNone, CompressLZ4} {
		paths := spanFiles(t, samples, []int{15, 25}, comp)
		srv := newFileServer(t, filepath.Dir(paths[0]))
		r := openReader(t, ReaderOptions{CheckData: true}, srv.URL+"/PART_00000.ffr", srv.URL+"/PART_00001.ffr")
		for _, run := range [][2]uint64{{0, 40}, {3, 15}, {14, 16}, {15, 40}, {39, 40}, {7, 7}} {
			got, err := readSpan(r, run[0], run[1])
			if err != nil {
				t.Fatalf("%v %v: %v", comp, run, err)
			}
			assertSamples(t, got, samples[run[0]:run[1]])
		}
	}
}

// A damaged sample is ErrChecksum naming its file and its index in the file and in the
// dataset, for every run that holds it, checked; runs beside it, and unchecked readers,
// read.
func TestReadSpanDamagedSample(t *testing.T) {
	samples := [][]byte{[]byte("aa"), []byte("bbb"), {}, []byte("cccc"), []byte("dd"), []byte("e")}
	paths := spanFiles(t, samples, []int{3, 3}, CompressNone)
	header, _ := headerSize(3)
	flipBit(t, paths[1], int64(header)+4+1) // sample 1 of the second file: "dd", 4 of the dataset
	r := openReader(t, ReaderOptions{CheckData: true}, paths...)
	for _, run := range [][2]uint64{{0, 6}, {4, 5}, {3, 6}, {1, 5}} {
		_, err := readSpan(r, run[0], run[1])
		if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), paths[1]+": sample 1:") ||
			!strings.Contains(err.Error(), "sample 4 of the dataset") {
			t.Errorf("%v: %v", run, err)
		}
	}
	for _, run := range [][2]uint64{{0, 4}, {5, 6}} {
		if _, err := readSpan(r, run[0], run[1]); err != nil {
			t.Errorf("%v misses the damage: %v", run, err)
		}
	}
	unchecked := openReader(t, ReaderOptions{}, paths...)
	if got, err := readSpan(unchecked, 0, 6); err != nil || !bytes.Equal(got[4], []byte("de")) {
		t.Errorf("unchecked: %q, %v", got, err)
	}
}

// Bad arguments are refused before anything is read: a run past the end (ErrIndex), too
// few offsets (ErrInvalid), a short buffer (io.ErrShortBuffer, offsets filled).
func TestReadSpanBadArguments(t *testing.T) {
	samples := [][]byte{[]byte("ab"), []byte("cde"), []byte("f")}
	paths := spanFiles(t, samples, []int{2, 1}, CompressNone)
	r := openReader(t, ReaderOptions{CheckData: true}, paths...)
	offsets := make([]uint64, 4)
	for _, run := range [][2]uint64{{0, 4}, {3, 1}, {4, 0}, {1, ^uint64(0)}} {
		if err := r.ReadSpan(run[0], run[1], make([]byte, 10), make([]uint64, 8)); !errors.Is(err, ErrIndex) {
			t.Errorf("%v: %v", run, err)
		}
	}
	if err := r.ReadSpan(0, 3, make([]byte, 10), offsets[:3]); !errors.Is(err, ErrInvalid) {
		t.Errorf("3 offsets for 3 samples: %v", err)
	}
	dst := bytes.Repeat([]byte{'#'}, 5)
	err := r.ReadSpan(0, 3, dst, offsets)
	if !errors.Is(err, io.ErrShortBuffer) || fmt.Sprint(offsets) != "[0 2 5 6]" || string(dst) != "#####" {
		t.Errorf("short buffer: %v, offsets %v, dst %q", err, offsets, dst)
	}
	if err := r.ReadSpan(3, 0, nil, offsets[:1]); err != nil || offsets[0] != 0 {
		t.Errorf("an empty run at the end: %v", err)
	}
	_ = r.Close()
	if err := r.ReadSpan(0, 1, make([]byte, 2), offsets); !errors.Is(err, ErrClosed) {
		t.Errorf("closed: %v", err)
	}
}

// A run long enough to be checked on every core reads back the samples written, and a
// damaged sample in any part of it is reported, named as in a short run.
func TestReadSpanLargeRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 9))
	samples := randomSamples(rng, 3*parallelChecks, 64)
	path := tempPath(t, "large.ffr")
	writeSamples(t, path, samples, WriterOptions{})
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	got, err := readSpan(r, 0, uint64(len(samples)))
	if err != nil {
		t.Fatal(err)
	}
	assertSamples(t, got, samples)
	header, _ := headerSize(uint64(len(samples)))
	for _, bad := range []int{7, len(samples)/2 + 3, len(samples) - 2} {
		for len(samples[bad]) == 0 {
			bad++
		}
		var at int64
		for _, s := range samples[:bad] {
			at += int64(len(s))
		}
		flipBit(t, path, int64(header)+at)
		damaged := openReader(t, ReaderOptions{CheckData: true}, path)
		_, err := readSpan(damaged, 0, uint64(len(samples)))
		if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), fmt.Sprintf("%s: sample %d:", path, bad)) {
			t.Errorf("sample %d damaged: %v", bad, err)
		}
		flipBit(t, path, int64(header)+at)
	}
}
