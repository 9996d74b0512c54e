package core

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// evict drops the file's pages from the page cache (they are on disk: the writer synced).
func evict(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// cachedPages counts the pages of the samples' stored bytes that are in the page cache.
func cachedPages(t testing.TB, r *Reader, indices []uint64) (cached, total int) {
	t.Helper()
	for _, index := range indices {
		fk, local, err := r.locate(index)
		if err != nil {
			t.Fatal(err)
		}
		f := r.files[fk]
		off, end, err := f.span(local)
		if err != nil {
			t.Fatal(err)
		}
		for page := off &^ (pageSize - 1); page < end; page += pageSize {
			total++
			if pageResident(f.data, page) {
				cached++
			}
		}
	}
	return cached, total
}

// With a descriptor the prefetch advises the file (FADV_WILLNEED), without one its mapping
// (MADV_WILLNEED).
func TestPrefetchBringsSamplesIntoThePageCache(t *testing.T) {
	for _, noDescriptors := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoDescriptors=%v", noDescriptors), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "p.ffr")
			samples := make([][]byte, 512)
			for i := range samples {
				samples[i] = make([]byte, 8<<10)
				samples[i][0] = byte(i)
			}
			writeSamples(t, path, samples, WriterOptions{})
			r := openReader(t, ReaderOptions{CheckData: true, NoDescriptors: noDescriptors}, path)
			// Pages the reader maps (the header, and the extension probe at the end) stay cached,
			// with whatever large folio holds them: prefetch samples whose pages eviction dropped.
			evict(t, path)
			var wanted []uint64
			for i := uint64(0); i < uint64(len(samples)) && len(wanted) < 6; i += 37 {
				if cached, _ := cachedPages(t, r, []uint64{i}); cached == 0 {
					wanted = append(wanted, i)
				}
			}
			if len(wanted) < 3 {
				t.Skipf("only %d samples could be evicted: cannot observe prefetching here", len(wanted))
			}
			if queued, err := r.Prefetch(wanted); err != nil || queued != len(wanted) {
				t.Fatalf("Prefetch queued %d of %d reads, err = %v", queued, len(wanted), err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				cached, total := cachedPages(t, r, wanted)
				if cached == total {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d pages cached 30 s after Prefetch", cached, total)
				}
				time.Sleep(time.Millisecond)
			}
			got, err := readSamples(r, wanted)
			if err != nil {
				t.Fatal(err)
			}
			for k, index := range wanted {
				if got[k][0] != byte(index) {
					t.Fatalf("sample %d starts with %d", index, got[k][0])
				}
			}
		})
	}
}

func TestPrefetchErrorsAndClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.ffr")
	writeSamples(t, path, [][]byte{[]byte("a"), nil, []byte("ccc")}, WriterOptions{})
	for _, direct := range []bool{false, true} {
		r, err := Open([]string{path}, ReaderOptions{Direct: direct})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Prefetch([]uint64{0, 3}); !errors.Is(err, ErrIndex) {
			t.Fatalf("direct=%v: index past the end: err = %v, want ErrIndex", direct, err)
		}
		for range 2 * maxPrefetching { // more than run at once: the rest are dropped
			if _, err := r.Prefetch([]uint64{2, 1, 0, 2}); err != nil {
				t.Fatal(err)
			}
		}
		if queued, err := r.Prefetch(nil); err != nil || queued != 0 {
			t.Fatalf("nothing to prefetch: queued %d, err = %v", queued, err)
		}
		if err := r.Close(); err != nil { // waits for the prefetches still running
			t.Fatal(err)
		}
		if got := r.prefetching.Load(); got != 0 {
			t.Fatalf("%d prefetches still running after Close", got)
		}
		if _, err := r.Prefetch([]uint64{0}); !errors.Is(err, ErrClosed) {
			t.Fatalf("after Close: err = %v, want ErrClosed", err)
		}
	}
}

// BenchmarkReadColdPrefetch reads random batches of 4 KiB samples from a file evicted from
// the page cache, in runs of 16 batches as a loader worker would: with ahead=1, the next
// batch is prefetched before each batch is read.
func BenchmarkReadColdPrefetch(b *testing.B) {
	c := readCase{size: 4 << 10, batch: 64}
	path, n := benchFile(b, c.size, 256<<20, CompressNone)
	for _, ahead := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("size=%d/batch=%d/ahead=%d", c.size, c.batch, ahead), func(b *testing.B) {
			r := openReader(b, ReaderOptions{CheckData: true}, path)
			rng := rand.New(rand.NewPCG(5, 5))
			const run = 16
			batches := make([][]uint64, run)
			for k := range batches {
				batches[k] = make([]uint64, c.batch)
			}
			sizes := make([]uint64, c.batch)
			dst := make([]byte, c.batch*c.size)
			b.SetBytes(int64(run * c.batch * c.size))
			for b.Loop() {
				b.StopTimer()
				for _, batch := range batches {
					for k := range batch {
						batch[k] = uint64(rng.IntN(n))
					}
				}
				evict(b, path)
				b.StartTimer()
				for k := 0; k < ahead && k < run; k++ {
					if _, err := r.Prefetch(batches[k]); err != nil {
						b.Fatal(err)
					}
				}
				for k, batch := range batches {
					if ahead > 0 && k+ahead < run {
						if _, err := r.Prefetch(batches[k+ahead]); err != nil {
							b.Fatal(err)
						}
					}
					if err := r.ReadBatch(batch, dst, sizes); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N*run*c.batch)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
