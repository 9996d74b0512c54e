package core

import (
	"bufio"
	"bytes"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWriterTooFewSamplesLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "few.ffr")
	w, err := Create(path, 3, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteOne([]byte("one")); err != nil {
		t.Fatal(err)
	}
	err = w.Close()
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "n=3") || !strings.Contains(err.Error(), "1 were written") {
		t.Fatalf("Close: err = %v, want ErrInvalid naming n and the count", err)
	}
	onlyEntries(t, dir)
	if err2 := w.Close(); err2 != err {
		t.Fatalf("second Close: err = %v, want the first Close's %v", err2, err)
	}
}

func TestWriterTooManySamples(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(filepath.Join(dir, "many.ffr"), 1, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteOne(nil); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteOne([]byte("x")); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "n=1") {
		t.Fatalf("extra sample: err = %v, want ErrInvalid naming n", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close after a refused extra sample: %v", err)
	}
	onlyEntries(t, dir, "many.ffr")
}

func TestWriterAbortKeepsEarlierFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.ffr")
	writeSamples(t, path, [][]byte{[]byte("old")}, WriterOptions{})
	w, err := Create(path, 1, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteOne([]byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteOne([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after abort: err = %v", err)
	}
	onlyEntries(t, dir, "a.ffr")
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	assertSamples(t, readAll(t, r), [][]byte{[]byte("old")})
}

func TestWriterModeFollowsUmask(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	path := tempPath(t, "m.ffr")
	writeSamples(t, path, nil, WriterOptions{})
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, want 0640 (0644 less umask 027)", info.Mode().Perm())
	}
}

func TestWriterRejectsImpossibleCounts(t *testing.T) {
	dir := t.TempDir()
	if _, err := Create(filepath.Join(dir, "x.ffr"), maxSamples+1, WriterOptions{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("n too large: err = %v", err)
	}
	if _, err := Create(filepath.Join(dir, "x.ffr"), 1, WriterOptions{Compression: 9}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown compression: err = %v", err)
	}
	onlyEntries(t, dir)
}

// A writer killed with SIGKILL half-way leaves nothing at its path that opens as valid.
// The writer runs in a child process: this test binary, which TestMain turns into
// runKilledWriter.
func TestWriterKilledLeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "killed.ffr")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), killTargetEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "writing") {
		t.Fatalf("child said %q, %v", line, err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after kill: stat %s: %v, want no file", path, err)
	}
	if _, err := Open([]string{dir}, ReaderOptions{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("directory after kill opens as a dataset: %v", err)
	}
}

// runKilledWriter is the child of TestWriterKilledLeavesNoFile: it writes until killed.
func runKilledWriter(path string) {
	w, err := Create(path, 1<<24, WriterOptions{})
	if err != nil {
		panic(err)
	}
	for i := 0; ; i++ {
		if err := w.WriteOne(make([]byte, 1000)); err != nil {
			panic(err)
		}
		if i == 3*writeBuffer/1000 {
			os.Stdout.WriteString("writing\n")
		}
	}
}

// TestWriteBatchRefusedWhole: a batch the writer can refuse up front writes none of its
// samples, and the writer carries on.
func TestWriteBatchRefusedWhole(t *testing.T) {
	path := tempPath(t, "b.ffr")
	w, err := Create(path, 3, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBatch([]byte("abc"), []uint64{1, 2}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		data      string
		sizes     []uint64
		fragments []string
	}{
		{"sizes beyond the data", "xy", []uint64{1, 2}, []string{"more than its 2 bytes"}},
		{"sizes short of the data", "xyz", []uint64{1, 1}, []string{"add up to 2 bytes", "data has 3"}},
		{"huge size", "xy", []uint64{1, ^uint64(0)}, []string{"more than its 2 bytes"}},
		{"more than the room left", "xy", []uint64{1, 1}, []string{"n=3", "a batch of 2 after 2 written", "none of it"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := w.WriteBatch([]byte(tt.data), tt.sizes)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			for _, f := range append(tt.fragments, path) {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("%q does not mention %q", err, f)
				}
			}
			if c := w.Count(); c != 2 {
				t.Fatalf("count %d after a refused batch, want 2", c)
			}
		})
	}
	if err := w.WriteBatch(nil, nil); err != nil { // an empty batch always fits
		t.Fatal(err)
	}
	if err := w.WriteBatch([]byte("d"), []uint64{1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBatch(nil, []uint64{0}); !errors.Is(err, ErrClosed) {
		t.Fatalf("batch after close: err = %v, want ErrClosed", err)
	}
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	assertSamples(t, readAll(t, r), [][]byte{[]byte("a"), []byte("bc"), []byte("d")})
}

func TestWriterSecondCloseRepeatsFirst(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(filepath.Join(dir, "twice.ffr"), 1, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteOne([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close after success: %v, want nil", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatalf("Abort after Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "twice.ffr")); err != nil {
		t.Fatalf("Abort after Close removed the file: %v", err)
	}
	if err := w.WriteOne([]byte("y")); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after Close: %v, want ErrClosed", err)
	}
}

// Samples around the size from which batches are written from the caller's memory, mixed
// with small ones and spread over WriteVectors, WriteBatch and WriteOne, read back intact
// and in order, compressed or not.
func TestWriteVectorsMixedSizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	var samples [][]byte
	for _, size := range []int{0, 1, vectorWriteMin - 1, vectorWriteMin, 200 << 10, 3,
		directWriteMin + 5, 70 << 10, 70 << 10, 5, vectorWriteMin, 90 << 10} {
		s := make([]byte, size)
		fillRandom(rng, s)
		samples = append(samples, s)
	}
	for _, comp := range []Compression{CompressNone, CompressLZ4} {
		path := filepath.Join(t.TempDir(), "v.ffr")
		w, err := Create(path, uint64(len(samples)), WriterOptions{Compression: comp})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteVectors(samples[:6]); err != nil {
			t.Fatal(err)
		}
		joined := bytes.Join(samples[6:10], nil)
		sizes := []uint64{uint64(len(samples[6])), uint64(len(samples[7])), uint64(len(samples[8])), uint64(len(samples[9]))}
		if err := w.WriteBatch(joined, sizes); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteOne(samples[10]); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteVectors(samples[11:]); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteVectors(samples[:1]); !errors.Is(err, ErrInvalid) {
			t.Fatalf("a sample past n: err = %v, want ErrInvalid", err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r := openReader(t, ReaderOptions{CheckData: true}, path)
		indices := make([]uint64, len(samples))
		for k := range indices {
			indices[k] = uint64(k)
		}
		got, err := readSamples(r, indices)
		if err != nil {
			t.Fatal(err)
		}
		for k := range samples {
			if !bytes.Equal(got[k], samples[k]) {
				t.Fatalf("%v: sample %d (%d bytes) differs", comp, k, len(samples[k]))
			}
		}
	}
}

// TestWriteHeaderAcrossBuffers compares the header written a buffer at a time with one
// encoded entry by entry, for tables that end just before, at and after a buffer's end.
func TestWriteHeaderAcrossBuffers(t *testing.T) {
	perBuffer := (writeBuffer - 8) / 4
	for _, n := range []int{0, 1, perBuffer - 1, perBuffer, perBuffer + 1, writeBuffer / offsetSize, 3 * perBuffer / 2} {
		crcs, rel := make([]uint32, n), make([]uint64, n)
		for k := range crcs {
			crcs[k], rel[k] = uint32(k)*2654435761, uint64(k)*37
		}
		path := filepath.Join(t.TempDir(), "header")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeHeader(f, crcs, rel, nil); err != nil {
			t.Fatal(err)
		}
		f.Close()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dataAt, _ := headerSize(uint64(n))
		want := le.AppendUint64(nil, uint64(n))
		for _, c := range crcs {
			want = le.AppendUint32(want, c)
		}
		for _, off := range rel {
			want = le.AppendUint64(want, dataAt+off)
		}
		want = append(le.AppendUint32(nil, crc32.ChecksumIEEE(want)), want...)
		if !bytes.Equal(got, want) {
			t.Fatalf("n=%d: the header differs from one encoded entry by entry", n)
		}
	}
}

// TestWriteBatchOfManySmallSamples writes batches large enough that their CRCs are
// computed on several goroutines while the data is written (sizes 0 to 40 bytes, after a
// sample already buffered, one batch over directWriteMin), and reads every sample back
// against its checksum.
func TestWriteBatchOfManySmallSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var samples [][]byte
	for range 3 * parallelChecks {
		s := make([]byte, rng.IntN(41))
		fillRandom(rng, s)
		samples = append(samples, s)
	}
	for range directWriteMin / 1000 {
		samples = append(samples, bytes.Repeat([]byte{byte(rng.IntN(256))}, 1000+rng.IntN(100)))
	}
	path := filepath.Join(t.TempDir(), "many.ffr")
	w, err := Create(path, uint64(len(samples)), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteOne(samples[0]); err != nil {
		t.Fatal(err)
	}
	for _, part := range [][][]byte{samples[1 : 3*parallelChecks], samples[3*parallelChecks:]} {
		sizes := make([]uint64, len(part))
		for k, s := range part {
			sizes[k] = uint64(len(s))
		}
		if err := w.WriteBatch(bytes.Join(part, nil), sizes); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	assertSamples(t, readAll(t, openReader(t, ReaderOptions{CheckData: true}, path)), samples)
}
