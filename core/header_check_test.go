package core

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/klauspost/crc32"
)

// The CRC of two stretches combined is the CRC of both read in one go, for lengths around
// and across the powers of two that the combination is made of.
func TestCRC32Combine(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	data := make([]byte, 1<<20)
	fillRandom(rng, data)
	for _, cut := range []int{0, 1, 7, 8, 9, 4095, 4096, 65537, 1 << 19, 1<<20 - 1, 1 << 20} {
		a, b := data[:cut], data[cut:]
		got := crc32Combine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), uint64(len(b)))
		if want := crc32.ChecksumIEEE(data); got != want {
			t.Fatalf("cut at %d: combined 0x%08x, want 0x%08x", cut, got, want)
		}
	}
	// The powers of x repeat after 32 squarings, which lets 32 of them serve any length.
	if again := multModP(crc32PowersOfX[31], crc32PowersOfX[31]); again != crc32PowersOfX[0] {
		t.Fatalf("x^(2^32) = 0x%08x, want x = 0x%08x", again, crc32PowersOfX[0])
	}
}

// A header large enough to be checked in parallel stretches: damage anywhere in it is
// found, the checksum first, and an offset out of order or past the end of the file is
// named by its sample, whichever stretch holds it.
func TestLargeHeaderCheck(t *testing.T) {
	n := uint64(parallelHeaderBytes/perSampleHeader + 1000)
	path := filepath.Join(memoryDir(t), "large.ffr")
	samples := make([][]byte, n)
	for i := range samples {
		samples[i] = []byte{byte(i)}
	}
	writeSamples(t, path, samples, WriterOptions{})
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	late := n - 10 // in the last stretch
	damaged := func(name string, change func(raw []byte)) string {
		raw := bytes.Clone(good)
		change(raw)
		p := filepath.Join(filepath.Dir(path), name)
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lastOffset := offsetPos(n, n-1)
	flipped := damaged("flipped.ffr", func(raw []byte) { raw[lastOffset] ^= 1 })
	if _, err := Open([]string{flipped}, ReaderOptions{CheckData: true}); !errors.Is(err, ErrChecksum) {
		t.Fatalf("a flipped offset bit: err = %v, want ErrChecksum", err)
	}
	// Without a metadata checksum (old writers) the offsets alone show the damage.
	unordered := damaged("unordered.ffr", func(raw []byte) {
		le.PutUint32(raw, 0)
		le.PutUint64(raw[offsetPos(n, late):], le.Uint64(raw[offsetPos(n, late-1):])-1)
	})
	_, err = Open([]string{unordered}, ReaderOptions{CheckData: true})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprint(late)) {
		t.Fatalf("an offset out of order: err = %v, want ErrCorrupt naming sample %d", err, late)
	}
	cut := damaged("cut.ffr", func(raw []byte) {
		le.PutUint32(raw, 0)
		for i := late; i < n; i++ {
			le.PutUint64(raw[offsetPos(n, i):], uint64(len(raw))+i)
		}
	})
	r, err := Open([]string{cut}, ReaderOptions{CheckData: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if w := r.Warnings(); len(w) != 2 || !strings.Contains(w[1], fmt.Sprintf("samples from %d on are missing", late-1)) {
		t.Fatalf("warnings %q: want the metadata one, then the cut at sample %d", w, late-1)
	}
}

// Checking a header held in memory that is not a file's mapping (here a page-aligned Go
// heap slice, as a test's fake file may be) leaves its bytes intact: releasing the pages
// behind the check with MADV_DONTNEED would have emptied them (TestSpansPastFourGiB read
// sample 0's span as zeros whenever its slice happened to start a page).
func TestHeaderCheckKeepsMemoryThatIsNotAFileMapping(t *testing.T) {
	n := 3 * pageSize / perSampleHeader // a header of about three pages
	header, _ := headerSize(n)
	room := (header + pageSize - 1) &^ (pageSize - 1)
	backing := make([]byte, room+pageSize)
	skip := (pageSize - uint64(uintptr(unsafe.Pointer(&backing[0])))%pageSize) % pageSize
	data := backing[skip : skip+room : skip+room]
	le.PutUint64(data[metaChecksumSize:], n)
	for i := range n {
		le.PutUint64(data[offsetPos(n, i):], header+i)
	}
	want := bytes.Clone(data)
	f := &dataFile{path: "heap.ffr", size: header + n, data: data, stored: n, header: header, fd: -1, directFd: -1}
	var warnings []string
	if err := f.checkHeader(&warnings); err != nil || len(warnings) != 0 {
		t.Fatalf("checkHeader: %v %q", err, warnings)
	}
	if !bytes.Equal(data, want) {
		t.Fatal("checking the header changed the memory holding it")
	}
	if off, end, err := f.span(0); err != nil || off != header || end != header+1 {
		t.Fatalf("span(0) = %d, %d, %v; want %d, %d", off, end, err, header, header+1)
	}
}
