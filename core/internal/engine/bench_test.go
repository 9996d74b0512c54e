package engine

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkEngine measures batches of random reads of a 256 MiB file. cache=cold: before
// each iteration the file's pages are dropped from the page cache with
// posix_fadvise(DONTNEED), and reads start at random page-aligned offsets. cache=warm:
// the file stays cached (buffered fds only) and reads start anywhere. engine=loop is the
// baseline: one pread after another (queue depth 1).
func BenchmarkEngine(b *testing.B) {
	const fileSize = 256 << 20
	path := writeBenchFile(b, fileSize)
	fds := map[bool]int{}
	for _, direct := range []bool{false, true} {
		flags := os.O_RDONLY
		if direct {
			flags |= unix.O_DIRECT
		}
		f, err := os.OpenFile(path, flags, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		fds[direct] = int(f.Fd())
	}
	engines := map[string]Engine{}
	for _, kind := range engineKinds {
		e, err := New(kind)
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		engines[kind] = e
	}
	type shape struct {
		cache  string
		size   int
		batch  int
		direct bool
	}
	shapes := []shape{
		{"cold", 4096, 256, false}, {"cold", 4096, 256, true},
		{"cold", 128 << 10, 64, false}, {"cold", 128 << 10, 64, true},
		{"warm", 1024, 256, false}, {"warm", 128 << 10, 64, false},
	}
	for _, kind := range append([]string{"loop"}, engineKinds...) {
		for _, sh := range shapes {
			cold, size, batch, direct := sh.cache == "cold", sh.size, sh.batch, sh.direct
			name := fmt.Sprintf("engine=%s/cache=%s/size=%d/direct=%v", kind, sh.cache, size, direct)
			b.Run(name, func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				reqs := make([]Request, batch)
				for i := range reqs {
					reqs[i] = Request{FD: fds[direct], Buf: make([]byte, size)}
				}
				if !cold {
					warmPageCache(b, fds[false], fileSize)
				}
				b.SetBytes(int64(size * batch))
				for b.Loop() {
					b.StopTimer()
					if cold {
						if err := unix.Fadvise(fds[false], 0, 0, unix.FADV_DONTNEED); err != nil {
							b.Fatal(err)
						}
					}
					for i := range reqs {
						reqs[i].Off = int64(rng.IntN(fileSize - size))
						if cold {
							reqs[i].Off &^= 4095
						}
					}
					b.StartTimer()
					var err error
					if kind == "loop" {
						err = preadLoop(reqs)
					} else {
						err = engines[kind].Read(reqs, direct)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "reads/s")
			})
		}
	}
}

// warmPageCache reads the whole file once so that every page is cached.
func warmPageCache(b *testing.B, fd, size int) {
	buf := make([]byte, 1<<20)
	for off := 0; off < size; off += len(buf) {
		if _, err := unix.Pread(fd, buf, int64(off)); err != nil {
			b.Fatal(err)
		}
	}
}

func preadLoop(reqs []Request) error {
	for _, r := range reqs {
		if _, err := unix.Pread(r.FD, r.Buf, r.Off); err != nil {
			return err
		}
	}
	return nil
}

// writeBenchFile writes size bytes of random data and flushes them to disk, so that
// posix_fadvise(DONTNEED) can evict every page.
func writeBenchFile(b *testing.B, size int) string {
	path := filepath.Join(b.TempDir(), "bench")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 1<<20)
	rng := rand.NewChaCha8([32]byte{5, 6})
	for written := 0; written < size; written += len(block) {
		rng.Read(block)
		if _, err := f.Write(block); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	return path
}
