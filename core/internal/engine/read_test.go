package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

var engineKinds = []string{"io_uring", "aio", "pread"}

// engineTestFile is a file of random bytes open both buffered and with O_DIRECT.
type engineTestFile struct {
	data     []byte
	buffered *os.File
	direct   *os.File
}

// newEngineTestFile writes size seeded random bytes; a size off any block boundary
// leaves a short last block for the O_DIRECT paths.
func newEngineTestFile(t testing.TB, size int, seed uint64) *engineTestFile {
	t.Helper()
	data := make([]byte, size)
	rand.NewChaCha8([32]byte{byte(seed)}).Read(data)
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	buffered, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buffered.Close(); direct.Close() })
	return &engineTestFile{data: data, buffered: buffered, direct: direct}
}

func (f *engineTestFile) fd(direct bool) int {
	if direct {
		return int(f.direct.Fd())
	}
	return int(f.buffered.Fd())
}

// forEachEngine runs body once per engine implementation and mode.
func forEachEngine(t *testing.T, body func(t *testing.T, e Engine, direct bool)) {
	for _, kind := range engineKinds {
		e, err := New(kind)
		if err != nil {
			t.Errorf("%s unavailable on this machine: %v", kind, err)
			continue
		}
		for _, direct := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/direct=%v", kind, direct), func(t *testing.T) { body(t, e, direct) })
		}
		if err := e.Close(); err != nil {
			t.Errorf("%s: close: %v", kind, err)
		}
	}
}

// engineRandomRequests draws n in-file requests with every awkward shape: empty, one byte,
// unaligned, spanning pages, ending exactly at end of file, the whole file.
func engineRandomRequests(rng *rand.Rand, f *engineTestFile, direct bool, n int) []Request {
	size := len(f.data)
	reqs := make([]Request, n)
	for i := range reqs {
		var off, length int
		switch i % 6 {
		case 0:
			off = rng.IntN(size + 1)
		case 1:
			off, length = rng.IntN(size), 1
		case 2:
			off = rng.IntN(size)
			length = rng.IntN(min(size-off, 3*4096) + 1)
		case 3:
			length = rng.IntN(min(size, 20000) + 1)
			off = size - length
		case 4:
			off = rng.IntN(size/4096) * 4096
			length = min(4096, size-off)
		case 5:
			length = size
		}
		reqs[i] = Request{FD: f.fd(direct), Off: int64(off), Buf: make([]byte, length)}
	}
	return reqs
}

func engineCheckRequests(t *testing.T, f *engineTestFile, reqs []Request) {
	t.Helper()
	for i, r := range reqs {
		want := f.data[r.Off : r.Off+int64(len(r.Buf))]
		if !bytes.Equal(r.Buf, want) {
			t.Fatalf("request %d (offset %d, %d bytes): bytes differ from the file", i, r.Off, len(r.Buf))
		}
	}
}

func TestEngineRandomReads(t *testing.T) {
	f := newEngineTestFile(t, 300_001, 7)
	forEachEngine(t, func(t *testing.T, e Engine, direct bool) {
		rng := rand.New(rand.NewPCG(11, 12))
		for _, n := range []int{0, 1, 2, 63, 64, 65, 300} {
			reqs := engineRandomRequests(rng, f, direct, n)
			if err := e.Read(reqs, direct); err != nil {
				t.Fatalf("batch of %d: %v", n, err)
			}
			engineCheckRequests(t, f, reqs)
		}
	})
}

// TestEngineContiguous reads a file as consecutive samples of random sizes, the shape
// of a batch of neighbouring indices, whose O_DIRECT reads share blocks.
func TestEngineContiguous(t *testing.T) {
	f := newEngineTestFile(t, 150_003, 13)
	forEachEngine(t, func(t *testing.T, e Engine, direct bool) {
		rng := rand.New(rand.NewPCG(5, 6))
		var reqs []Request
		for off := 0; off < len(f.data); {
			n := min(rng.IntN(3000), len(f.data)-off)
			reqs = append(reqs, Request{FD: f.fd(direct), Off: int64(off), Buf: make([]byte, n)})
			off += n
		}
		rng.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
		if err := e.Read(reqs, direct); err != nil {
			t.Fatal(err)
		}
		engineCheckRequests(t, f, reqs)
	})
}

// TestEngineDirectLarge reads more than one round of bounce memory, and requests that
// are split into several aligned pieces, with O_DIRECT.
func TestEngineDirectLarge(t *testing.T) {
	savedPiece, savedRound := directPiece, directRound
	directPiece, directRound = 64<<10, 256<<10
	defer func() { directPiece, directRound = savedPiece, savedRound }()
	f := newEngineTestFile(t, 3*directPiece+12_345, 14)
	forEachEngine(t, func(t *testing.T, e Engine, direct bool) {
		if !direct {
			return
		}
		rng := rand.New(rand.NewPCG(7, 8))
		fd := f.fd(true)
		reqs := []Request{{FD: fd, Off: 0, Buf: make([]byte, len(f.data))}}
		for range 2 * directRound / directPiece {
			n := directPiece/2 + rng.IntN(directPiece)
			reqs = append(reqs, Request{FD: fd, Off: int64(rng.IntN(len(f.data) - n)), Buf: make([]byte, n)})
		}
		if err := e.Read(reqs, true); err != nil {
			t.Fatal(err)
		}
		engineCheckRequests(t, f, reqs)
	})
}

// TestEngineChunks shrinks the per-read cap so every request is split into several
// reads, as requests over 1 GiB are.
func TestEngineChunks(t *testing.T) {
	f := newEngineTestFile(t, 100_000, 8)
	saved := MaxChunk
	MaxChunk = 3 * 4096
	defer func() { MaxChunk = saved }()
	forEachEngine(t, func(t *testing.T, e Engine, direct bool) {
		reqs := engineRandomRequests(rand.New(rand.NewPCG(3, 4)), f, direct, 100)
		if err := e.Read(reqs, direct); err != nil {
			t.Fatal(err)
		}
		engineCheckRequests(t, f, reqs)
	})
}

func TestEnginePastEOF(t *testing.T) {
	const size = 10_000
	f := newEngineTestFile(t, size, 9)
	cases := []struct{ off, length int }{
		{size - 10, 11},
		{size - 1, 4097},
		{size, 1},
		{size + 5000, 100},
		{0, size + 1},
	}
	forEachEngine(t, func(t *testing.T, e Engine, direct bool) {
		for _, c := range cases {
			good := Request{FD: f.fd(direct), Off: 0, Buf: make([]byte, 100)}
			// A neighbour in the same blocks: O_DIRECT merges it with the bad request.
			neighbour := Request{FD: f.fd(direct), Off: size - 100, Buf: make([]byte, 90)}
			bad := Request{FD: f.fd(direct), Off: int64(c.off), Buf: make([]byte, c.length)}
			err := e.Read([]Request{good, neighbour, bad, good}, direct)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("%d bytes at %d: got %v, want io.ErrUnexpectedEOF", c.length, c.off, err)
			}
		}
	})
}

func TestEngineBadFD(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine, direct bool) {
		err := e.Read([]Request{{FD: -1, Off: 0, Buf: make([]byte, 10)}}, direct)
		if !errors.Is(err, unix.EBADF) {
			t.Errorf("got %v, want EBADF", err)
		}
	})
}

func TestEngineConcurrentCallers(t *testing.T) {
	f := newEngineTestFile(t, 70_001, 10)
	forEachEngine(t, func(t *testing.T, e Engine, direct bool) {
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 99))
				for range 4 {
					reqs := engineRandomRequests(rng, f, direct, 1+rng.IntN(150))
					if err := e.Read(reqs, direct); err != nil {
						t.Error(err)
						return
					}
					engineCheckRequests(t, f, reqs)
				}
			})
		}
		wg.Wait()
	})
}

func TestEngineDefault(t *testing.T) {
	e, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Default()
	if again != e {
		t.Error("Default returned a different engine on the second call")
	}
	if want := os.Getenv(Env); want != "" && e.Name() != want {
		t.Errorf("%s=%s but the default engine is %s", Env, want, e.Name())
	}
	if _, err := New("bogus"); !errors.Is(err, ErrUnknown) {
		t.Errorf("New(bogus): got %v, want ErrUnknown", err)
	}
}

func TestEngineSpanAdvance(t *testing.T) {
	cases := []struct {
		name     string
		span     readSpan
		reads    []int
		complete bool
		eof      bool
	}{
		{"full read", readSpan{buf: make([]byte, 10), need: 10, align: 1}, []int{10}, true, false},
		{"short read retried", readSpan{buf: make([]byte, 10), need: 10, align: 1}, []int{4, 6}, true, false},
		{"end of file", readSpan{buf: make([]byte, 10), need: 10, align: 1}, []int{4, 0}, false, true},
		{"direct tail past need", readSpan{buf: make([]byte, 1024), need: 700, align: 512}, []int{800}, true, false},
		{"direct tail short of need", readSpan{buf: make([]byte, 1024), need: 900, align: 512}, []int{800}, false, true},
		{"direct aligned short retried", readSpan{buf: make([]byte, 1024), need: 1024, align: 512}, []int{512, 512}, true, false},
		{"direct nothing", readSpan{buf: make([]byte, 512), need: 1, align: 512}, []int{0}, false, true},
	}
	for _, c := range cases {
		s := c.span
		var complete bool
		var err error
		for _, n := range c.reads {
			if complete || err != nil {
				t.Fatalf("%s: finished before all reads", c.name)
			}
			s.next()
			complete, err = s.advance(n)
		}
		if complete != c.complete || errors.Is(err, io.ErrUnexpectedEOF) != c.eof {
			t.Errorf("%s: complete=%v err=%v, want complete=%v eof=%v", c.name, complete, err, c.complete, c.eof)
		}
	}
}

// TestEngineKernelStructs pins the Go mirrors of kernel structures to their ABI sizes.
func TestEngineKernelStructs(t *testing.T) {
	sizes := []struct {
		name      string
		got, want uintptr
	}{
		{"io_uring_params", unsafe.Sizeof(uringParams{}), 120},
		{"io_uring_sqe", unsafe.Sizeof(uringSQE{}), 64},
		{"io_uring_cqe", unsafe.Sizeof(uringCQE{}), 16},
		{"io_uring_probe", unsafe.Sizeof(uringProbe{}), 16 + 256*8},
		{"iocb", unsafe.Sizeof(aioIOCB{}), 64},
		{"io_event", unsafe.Sizeof(aioEvent{}), 32},
	}
	for _, s := range sizes {
		if s.got != s.want {
			t.Errorf("%s: %d bytes, want %d", s.name, s.got, s.want)
		}
	}
}
