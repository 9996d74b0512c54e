package core

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// benchFile writes a file of samples of the given size, totalling about total bytes.
func benchFile(b *testing.B, size, total int, comp Compression) (string, int) {
	b.Helper()
	n := max(1, total/size)
	path := filepath.Join(b.TempDir(), "bench.ffr")
	writeSamples(b, path, slices.Repeat([][]byte{benchSample(size)}, n), WriterOptions{Compression: comp})
	return path, n
}

// benchSample is half random, half repeated text: compressible about 2:1.
func benchSample(size int) []byte {
	rng := rand.New(rand.NewPCG(1, uint64(size)))
	s := make([]byte, size)
	fillRandom(rng, s[:size/2])
	for i := size / 2; i < size; i++ {
		s[i] = "ffrecord"[i%8]
	}
	return s
}

// BenchmarkWrite writes 64 MiB files. mode=stream times the WriteOne calls (the data
// reaches the page cache, as the reference's writer leaves it); mode=durable also times
// Close: header, fsync, rename and directory fsync.
func BenchmarkWrite(b *testing.B) {
	for _, size := range []int{1 << 10, 128 << 10} {
		for _, comp := range []Compression{CompressNone, CompressLZ4} {
			for _, durable := range []bool{false, true} {
				mode := map[bool]string{false: "stream", true: "durable"}[durable]
				b.Run(fmt.Sprintf("size=%d/%v/mode=%s", size, comp, mode), func(b *testing.B) {
					const total = 64 << 20
					n := total / size
					sample := benchSample(size)
					dir := b.TempDir()
					b.SetBytes(int64(n * size))
					for b.Loop() {
						w, err := Create(filepath.Join(dir, "w.ffr"), uint64(n), WriterOptions{Compression: comp})
						if err != nil {
							b.Fatal(err)
						}
						for range n {
							if err := w.WriteOne(sample); err != nil {
								b.Fatal(err)
							}
						}
						if !durable {
							b.StopTimer()
						}
						if err := w.Close(); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
				})
			}
		}
	}
}

type readCase struct {
	size, batch int
	comp        Compression
}

var readCases = []readCase{{1 << 10, 256, CompressNone}, {128 << 10, 64, CompressNone}, {1 << 10, 256, CompressLZ4}}

// BenchmarkReadWarm reads random batches from a file in the page cache. data=mapped copies
// them from the file's mapping, as for a dataset within mappedBudget; data=stream reads
// them with system calls, as for a larger one.
func BenchmarkReadWarm(b *testing.B) {
	for _, c := range readCases {
		path, n := benchFile(b, c.size, benchTotal(), c.comp)
		for _, check := range []bool{true, false} {
			for _, stream := range []bool{false, true} {
				data := map[bool]string{false: "mapped", true: "stream"}[stream]
				b.Run(fmt.Sprintf("size=%d/batch=%d/%v/check=%v/data=%s", c.size, c.batch, c.comp, check, data), func(b *testing.B) {
					defer setMappedBudget(map[bool]uint64{false: 1 << 62, true: 0}[stream])()
					r := openReader(b, ReaderOptions{CheckData: check}, path)
					readRandomBatches(b, r, n, c, nil)
				})
			}
		}
	}
}

// setMappedBudget sets mappedBudget for the readers opened next and returns what restores it.
func setMappedBudget(budget uint64) (restore func()) {
	old := mappedBudget
	mappedBudget = budget
	return func() { mappedBudget = old }
}

// BenchmarkReadCold reads random batches of 4 KiB samples with the file evicted from the
// page cache before every batch: posix_fadvise(POSIX_FADV_DONTNEED) over the whole file,
// outside the timed region (it drops clean pages that no process has mapped, which holds
// here: the reader only maps the pages it copies, and cold batches go to the engine).
func BenchmarkReadCold(b *testing.B) {
	for _, direct := range []bool{false, true} {
		for _, batch := range []int{64, 512} {
			c := readCase{size: 4 << 10, batch: batch}
			path, n := benchFile(b, c.size, 256<<20, CompressNone)
			b.Run(fmt.Sprintf("size=%d/batch=%d/direct=%v", c.size, batch, direct), func(b *testing.B) {
				r := openReader(b, ReaderOptions{CheckData: true, Direct: direct}, path)
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				readRandomBatches(b, r, n, c, func() {
					if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
}

// readRandomBatches times ReadBatch over random indices; before, if set, runs untimed
// ahead of each batch.
func readRandomBatches(b *testing.B, r *Reader, n int, c readCase, before func()) {
	rng := rand.New(rand.NewPCG(5, 5))
	indices := make([]uint64, c.batch)
	sizes := make([]uint64, c.batch)
	dst := make([]byte, c.batch*c.size)
	b.SetBytes(int64(c.batch * c.size))
	b.ReportAllocs()
	cpuStart := cpuTime()
	for b.Loop() {
		for k := range indices {
			indices[k] = uint64(rng.IntN(n))
		}
		if before != nil {
			b.StopTimer()
			before()
			b.StartTimer()
		}
		if err := r.ReadBatch(indices, dst, sizes); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*c.batch)/b.Elapsed().Seconds(), "samples/s")
	if before == nil {
		b.ReportMetric(float64(cpuTime()-cpuStart)/float64(b.N), "cpu-ns/op")
	}
}

// cpuTime is the CPU time this process has used: on a shared machine it moves far less
// than wall time when other work competes for the cores.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchTotal() int {
	var mb int
	if _, err := fmt.Sscan(os.Getenv("FFR_BENCH_MB"), &mb); err == nil {
		return mb << 20
	}
	return 256 << 20
}

// BenchmarkVerify checks every sample of a 256 MiB file in the page cache.
func BenchmarkVerify(b *testing.B) {
	for _, size := range []int{1 << 10, 128 << 10} {
		path, n := benchFile(b, size, benchTotal(), CompressNone)
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			r := openReader(b, ReaderOptions{}, path)
			b.SetBytes(int64(n * size))
			for b.Loop() {
				if bad, err := badIndices(r, 0, r.Len()); err != nil || len(bad) != 0 {
					b.Fatal(err, bad)
				}
			}
		})
	}
}
