package core

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// acrossFiles writes three files of random samples (one compressed with LZ4, one with
// zstd) and returns their paths and samples.
func acrossFiles(t *testing.T, rng *rand.Rand) ([]string, [][][]byte) {
	t.Helper()
	var paths []string
	var samples [][][]byte
	for k, c := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
		s := randomSamples(rng, 5+k*7, 3000)
		path := tempPath(t, []string{"a.ffr", "b.ffr", "c.ffr"}[k])
		writeSamples(t, path, s, WriterOptions{Compression: c})
		paths, samples = append(paths, path), append(samples, s)
	}
	return paths, samples
}

// readAcross reads the pairs with ReadAcross into a buffer with room to spare, whose bytes
// past the samples it checks are left untouched.
func readAcross(rs []*Reader, indices []uint64) ([][]byte, error) {
	sizes := make([]uint64, len(indices))
	if err := ReadAcross(rs, indices, nil, sizes); len(indices) > 0 && !errors.Is(err, io.ErrShortBuffer) {
		return nil, err
	}
	var total uint64
	for _, s := range sizes {
		total += s
	}
	const spare = 64
	dst := bytes.Repeat([]byte{0xA5}, int(total)+spare)
	if err := ReadAcross(rs, indices, dst, sizes); err != nil {
		return nil, err
	}
	if !bytes.Equal(dst[total:], bytes.Repeat([]byte{0xA5}, spare)) {
		return nil, errors.New("ReadAcross wrote past its samples")
	}
	return cutSamples(dst, sizes), nil
}

// TestReadAcross: random pairs of readers (checking data or not, direct or not, mapped or
// past the budget) and indices read as each reader reads its samples alone, whatever the
// order and the runs; a short buffer fills every size and reads nothing.
func TestReadAcross(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 35))
	paths, samples := acrossFiles(t, rng)
	for _, c := range []struct {
		name string
		opts ReaderOptions
		past bool // the second reader opened past the mapping budget
	}{
		{"checked", ReaderOptions{CheckData: true}, false},
		{"unchecked", ReaderOptions{}, false},
		{"without descriptors", ReaderOptions{CheckData: true, NoDescriptors: true}, false},
		{"direct", ReaderOptions{Direct: true, CheckData: true}, false},
		{"past the budget", ReaderOptions{CheckData: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs := []*Reader{openReader(t, c.opts, paths[0]), nil, openReader(t, ReaderOptions{CheckData: !c.opts.CheckData}, paths[2])}
			if c.past {
				restore := setMappedBudget(1)
				rs[1] = openReader(t, c.opts, paths[1])
				restore()
			} else {
				rs[1] = openReader(t, c.opts, paths[1])
			}
			for round := range 40 {
				n := rng.IntN(70)
				if round == 0 {
					n = 0
				}
				if round%10 == 5 { // cold: read from the disk (the engine, or a mapping's faults)
					for _, path := range paths {
						evictPath(path)
					}
				}
				pairs, indices := make([]*Reader, n), make([]uint64, n)
				var want [][]byte
				for k := range n {
					f := rng.IntN(3)
					if k > 0 && rng.IntN(3) == 0 { // runs of one reader too
						f = indexOf(rs, pairs[k-1])
					}
					pairs[k], indices[k] = rs[f], uint64(rng.IntN(len(samples[f])))
					want = append(want, samples[f][indices[k]])
				}
				got, err := readAcross(pairs, indices)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				assertSamples(t, got, want)
			}
		})
	}
}

func indexOf(rs []*Reader, r *Reader) int {
	for k := range rs {
		if rs[k] == r {
			return k
		}
	}
	return -1
}

// TestReadAcrossRefuses: a damaged sample is reported by the reader that checks data (and
// read as it is by one that does not, beside it); an index out of range, a closed reader
// and mismatched lengths are refused.
func TestReadAcrossRefuses(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 35))
	paths, samples := acrossFiles(t, rng)
	flipBit(t, paths[0], int64(12+12*len(samples[0])+3)) // in the first samples' bytes
	checked := openReader(t, ReaderOptions{CheckData: true}, paths[0])
	unchecked := openReader(t, ReaderOptions{}, paths[0])
	other := openReader(t, ReaderOptions{}, paths[2])
	sizes, dst := make([]uint64, 2), make([]byte, 1<<20)
	if err := ReadAcross([]*Reader{other, checked}, []uint64{1, 0}, dst, sizes); !errors.Is(err, ErrChecksum) {
		t.Fatalf("a damaged sample through a checking reader: %v", err)
	}
	got, err := readAcross([]*Reader{other, unchecked}, []uint64{1, 0})
	if err != nil || bytes.Equal(got[1], samples[0][0]) {
		t.Fatalf("a damaged sample through an unchecking reader: %v, equal to the original: %v", err, err == nil)
	}
	if err := ReadAcross([]*Reader{other}, []uint64{uint64(len(samples[2]))}, dst, sizes); !errors.Is(err, ErrIndex) {
		t.Fatalf("an index out of range: %v", err)
	}
	if err := ReadAcross([]*Reader{other, other}, []uint64{0}, dst, sizes); !errors.Is(err, ErrInvalid) {
		t.Fatalf("two readers for one index: %v", err)
	}
	closed := openReader(t, ReaderOptions{}, paths[1])
	_ = closed.Close()
	if err := ReadAcross([]*Reader{other, closed}, []uint64{0, 0}, dst, sizes); !errors.Is(err, ErrClosed) {
		t.Fatalf("a closed reader: %v", err)
	}
}

// Batches read across readers count in one residency streak, whichever reader reads each
// (in a mixture of many members it changes from batch to batch): warm batches raise it to
// one probe a batch, and a cold one starts it again and still arrives whole.
func TestJointReadsShareTheResidencyStreak(t *testing.T) {
	samples := make([][]byte, 600)
	for i := range samples {
		samples[i] = bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 2048)
	}
	readers := make([]*Reader, 4)
	paths := make([]string, len(readers))
	for k := range readers {
		paths[k] = tempPath(t, []string{"a.ffr", "b.ffr", "c.ffr", "d.ffr"}[k])
		writeSamples(t, paths[k], samples, WriterOptions{})
		readers[k] = openReader(t, ReaderOptions{CheckData: true}, paths[k])
	}
	batch := func(k int, first uint64) ([]*Reader, []uint64, [][]byte) {
		rs, indices, want := make([]*Reader, 2*jointFrom), make([]uint64, 2*jointFrom), make([][]byte, 2*jointFrom)
		for j := range rs {
			rs[j], indices[j] = readers[(k+j)%len(readers)], first+uint64(j)
			want[j] = samples[indices[j]]
		}
		return rs, indices, want
	}
	jointResident.Store(0)
	for k := range warmStreak + 2 {
		rs, indices, want := batch(k, 0)
		got, err := readAcross(rs, indices)
		if err != nil {
			t.Fatal(err)
		}
		assertSamples(t, got, want)
	}
	if got := jointResident.Load(); got < warmStreak {
		t.Fatalf("%d warm joint batches in a row counted, want >= %d", got, warmStreak)
	}
	for k, r := range readers {
		if n := r.residentBatches.Load(); n != 0 {
			t.Fatalf("reader %d counted %d joint batches as its own", k, n)
		}
	}
	for _, path := range paths {
		evict(t, path) // the pages the readers mapped stay; samples 300.. never were
	}
	rs, indices, want := batch(0, 300)
	if cached, _ := cachedPages(t, readers[0], indices[:1]); cached != 0 {
		t.Skipf("the page cache kept %d pages of evicted samples (this file system ignores FADV_DONTNEED)", cached)
	}
	got, err := readAcross(rs, indices)
	if err != nil {
		t.Fatal(err)
	}
	assertSamples(t, got, want)
	if n := jointResident.Load(); n != 0 {
		t.Fatalf("a cold joint batch left the warm count at %d", n)
	}
}
