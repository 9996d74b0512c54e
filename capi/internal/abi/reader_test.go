package abi

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/ffrecord/ffrecord/core"
)

// checkGolden reads every sample of golden file name through h, whose samples start at
// global index first, and compares them with the manifest.
func checkGolden(t *testing.T, m manifest, h int64, first uint64, name string) {
	t.Helper()
	want := m.Files[name].Samples
	if len(want) == 0 {
		t.Fatalf("manifest has no samples for %s", name)
	}
	indices := make([]uint64, len(want))
	for i := range indices {
		indices[i] = first + uint64(i)
	}
	for i, s := range readBatch(t, h, indices...) {
		if len(s) != want[i].Len || sha(s) != want[i].Sha256 {
			t.Errorf("%s sample %d: %d bytes, sha256 %s; want %d bytes, %s", name, i, len(s), sha(s), want[i].Len, want[i].Sha256)
		}
	}
}

func readerLen(t *testing.T, h int64) uint64 {
	t.Helper()
	var n uint64
	must(t, func() int32 { return ReaderLen(h, unsafe.Pointer(&n)) })
	return n
}

func readerFiles(t *testing.T, h int64) ([]string, []uint64) {
	t.Helper()
	var nfiles uint64
	must(t, func() int32 { return ReaderNfiles(h, unsafe.Pointer(&nfiles)) })
	names := make([]string, nfiles)
	for i := range names {
		names[i] = readText(t, func(buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) int32 {
			return ReaderFname(h, uint64(i), buf, size, needed)
		})
	}
	counts := make([]uint64, nfiles)
	must(t, func() int32 { return ReaderFileCounts(h, ptr(counts), nfiles) })
	return names, counts
}

// readText fetches a text result the way a caller without a size hint does: probe with an
// empty buffer, then copy.
func readText(t *testing.T, f func(buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) int32) string {
	t.Helper()
	var needed uintptr
	expect(t, StatusShortBuf, func() int32 { return f(nil, 0, unsafe.Pointer(&needed)) }, "cannot hold")
	buf := make([]byte, needed+1)
	var again uintptr
	must(t, func() int32 { return f(ptr(buf), uintptr(len(buf)), unsafe.Pointer(&again)) })
	if again != needed || buf[needed] != 0 {
		t.Fatalf("needed %d then %d, terminator %#x", needed, again, buf[needed])
	}
	return string(buf[:needed])
}

func TestReaderGoldenFile(t *testing.T) {
	noLeaks(t)
	m := loadManifest(t)
	for _, flags := range []uint32{0, FlagCheckData, FlagDirect, FlagCheckData | FlagDirect,
		FlagNoDescriptors, FlagCheckData | FlagNoDescriptors, FlagDirect | FlagNoDescriptors} {
		h := openReader(t, flags, golden("basic.ffr"))
		if n := readerLen(t, h); n != 25 {
			t.Fatalf("flags %d: len %d, want 25", flags, n)
		}
		var descriptors uint64
		must(t, func() int32 { return ReaderDescriptors(h, unsafe.Pointer(&descriptors)) })
		if held := flags&FlagDirect != 0 || flags&FlagNoDescriptors == 0; held != (descriptors > 0) {
			t.Fatalf("flags %d: %d descriptors held", flags, descriptors)
		}
		names, counts := readerFiles(t, h)
		if !slices.Equal(names, []string{golden("basic.ffr")}) || !slices.Equal(counts, []uint64{25}) {
			t.Fatalf("files %v counts %v", names, counts)
		}
		checkGolden(t, m, h, 0, "basic.ffr")
		var needed uintptr = 99
		buf := []byte{'x'}
		must(t, func() int32 { return ReaderWarnings(h, ptr(buf), 1, unsafe.Pointer(&needed)) })
		if needed != 0 || buf[0] != 0 {
			t.Errorf("warnings of a clean file: needed %d, buffer %q", needed, buf)
		}
	}
}

func TestReaderDirectoryAndLists(t *testing.T) {
	noLeaks(t)
	m := loadManifest(t)
	parts := []string{"multi/PART_00000.ffr", "multi/PART_00001.ffr", "multi/PART_00002.ffr"}
	h := openReader(t, FlagCheckData, golden("multi"))
	names, counts := readerFiles(t, h)
	wantNames := []string{golden(parts[0]), golden(parts[1]), golden(parts[2])}
	if !slices.Equal(names, wantNames) || !slices.Equal(counts, []uint64{19, 11, 14}) {
		t.Fatalf("directory: files %v counts %v", names, counts)
	}
	if n := readerLen(t, h); n != 44 {
		t.Fatalf("len %d, want 44", n)
	}
	checkGolden(t, m, h, 0, parts[0])
	checkGolden(t, m, h, 19, parts[1])
	checkGolden(t, m, h, 30, parts[2])

	// A list is read in the order given, and may mix files with the same file twice.
	list := openReader(t, 0, wantNames[2], golden("basic.ffr"), wantNames[2])
	_, counts = readerFiles(t, list)
	if !slices.Equal(counts, []uint64{14, 25, 14}) {
		t.Fatalf("list: counts %v", counts)
	}
	checkGolden(t, m, list, 0, parts[2])
	checkGolden(t, m, list, 14, "basic.ffr")
	checkGolden(t, m, list, 39, parts[2])

	// Indices in any order, with duplicates, across files.
	batch := readBatch(t, h, 43, 0, 19, 43, 5)
	for k, g := range []struct {
		file  string
		local int
	}{{parts[2], 13}, {parts[0], 0}, {parts[1], 0}, {parts[2], 13}, {parts[0], 5}} {
		if sha(batch[k]) != m.Files[g.file].Samples[g.local].Sha256 {
			t.Errorf("batch entry %d is not %s sample %d", k, g.file, g.local)
		}
	}
}

func TestReaderShortBufferReadsNothing(t *testing.T) {
	noLeaks(t)
	h := openReader(t, FlagCheckData, golden("basic.ffr"))
	indices := []uint64{2, 3}
	sizes := make([]uint64, 2)
	dst := bytes.Repeat([]byte{0xEE}, 256+4099-1)
	expect(t, StatusShortBuf, func() int32 {
		return ReaderReadBatch(h, ptr(indices), 2, ptr(dst), uint64(len(dst)), ptr(sizes))
	})
	if !slices.Equal(sizes, []uint64{256, 4099}) {
		t.Errorf("sizes %v after a short buffer, want [256 4099]", sizes)
	}
	if bytes.Count(dst, []byte{0xEE}) != len(dst) {
		t.Error("a short buffer was written to")
	}
	// A NULL buffer of length 0 is the cheapest way to learn the sizes.
	expect(t, StatusShortBuf, func() int32 { return ReaderReadBatch(h, ptr(indices), 2, nil, 0, ptr(sizes)) })
	// An empty batch, or a batch of empty samples, needs no buffer at all.
	must(t, func() int32 { return ReaderReadBatch(h, nil, 0, nil, 0, nil) })
	must(t, func() int32 { return ReaderReadBatch(h, ptr([]uint64{0, 0}), 2, nil, 0, ptr(sizes)) })
	if !slices.Equal(sizes, []uint64{0, 0}) {
		t.Errorf("sizes %v for two empty samples", sizes)
	}
}

func TestReaderIndexOutOfRange(t *testing.T) {
	noLeaks(t)
	h := openReader(t, FlagCheckData, golden("basic.ffr"))
	sizes := make([]uint64, 2)
	dst := make([]byte, 1<<20)
	for _, bad := range []uint64{25, 1 << 40, ^uint64(0)} {
		indices := []uint64{1, bad}
		expect(t, StatusIndex, func() int32 { return ReaderSizes(h, ptr(indices), 2, ptr(sizes)) })
		expect(t, StatusIndex, func() int32 {
			return ReaderReadBatch(h, ptr(indices), 2, ptr(dst), uint64(len(dst)), ptr(sizes))
		})
	}
	var needed uintptr
	expect(t, StatusIndex, func() int32 { return ReaderFname(h, 1, nil, 0, unsafe.Pointer(&needed)) }, "file 1")
}

// TestReaderReadRanges: triples of (index, offset, length) come back to back; bad ranges,
// short buffers and NULL arrays are refused naming what is wrong.
func TestReaderReadRanges(t *testing.T) {
	noLeaks(t)
	h := openReader(t, FlagCheckData, golden("basic.ffr"))
	whole := readBatch(t, h, 2, 3)
	triples := []uint64{3, 4000, 99, 2, 0, 256, 3, 4098, 1, 2, 10, 0}
	want := slices.Concat(whole[1][4000:4099], whole[0], whole[1][4098:])
	dst := make([]byte, len(want))
	must(t, func() int32 { return ReaderReadRanges(h, ptr(triples), 4, ptr(dst), uint64(len(dst))) })
	if !bytes.Equal(dst, want) {
		t.Fatal("ranges read the wrong bytes")
	}
	must(t, func() int32 { return ReaderReadRanges(h, nil, 0, nil, 0) })
	expect(t, StatusIndex, func() int32 {
		return ReaderReadRanges(h, ptr([]uint64{3, 4000, 100}), 1, ptr(dst), uint64(len(dst)))
	}, "sample 3", "bytes [4000, 4100)", "4099-byte sample")
	expect(t, StatusIndex, func() int32 { return ReaderReadRanges(h, ptr([]uint64{25, 0, 0}), 1, nil, 0) }, "sample 25")
	expect(t, StatusShortBuf, func() int32 { return ReaderReadRanges(h, ptr(triples), 4, ptr(dst), uint64(len(dst)-1)) })
	expect(t, StatusInvalid, func() int32 { return ReaderReadRanges(h, nil, 1, ptr(dst), 8) }, "triples is NULL")
	expect(t, StatusInvalid, func() int32 { return ReaderReadRanges(h, ptr(triples), 1, nil, 8) }, "dst is NULL")
	expect(t, StatusInvalid, func() int32 { return ReaderReadRanges(h, ptr(triples), 1<<62, ptr(dst), 8) }, "larger than any buffer")
}

// TestReaderReadValues: a column of nine 2-byte values, 4 to a block: gathered and ranged values are its bytes; a layout that does not fit, an
// index past the end, short and NULL buffers are refused naming what is wrong.
func TestReaderReadValues(t *testing.T) {
	noLeaks(t)
	path := filepath.Join(t.TempDir(), "col.ffr")
	blocks := [][]byte{bytes.Repeat([]byte{1}, 8), bytes.Repeat([]byte{2}, 8), {3, 3}}
	w, err := core.Create(path, 3, core.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if err := w.WriteOne(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	h := openReader(t, FlagCheckData, path)
	dst := make([]byte, 8)
	must(t, func() int32 { return ReaderReadValues(h, 9, 2, 4, ptr([]uint64{8, 0, 5}), 3, ptr(dst), 8) })
	if !bytes.Equal(dst[:6], []byte{3, 3, 1, 1, 2, 2}) {
		t.Fatalf("gathered %v", dst[:6])
	}
	must(t, func() int32 { return ReaderReadValueRange(h, 9, 2, 4, 3, 4, ptr(dst), 8) })
	if !bytes.Equal(dst, []byte{1, 1, 2, 2, 2, 2, 2, 2}) {
		t.Fatalf("range %v", dst)
	}
	must(t, func() int32 { return ReaderReadValues(h, 9, 2, 4, nil, 0, nil, 0) })
	expect(t, StatusIndex, func() int32 { return ReaderReadValues(h, 9, 2, 4, ptr([]uint64{9}), 1, ptr(dst), 8) }, "value 9")
	expect(t, StatusIndex, func() int32 { return ReaderReadValueRange(h, 9, 2, 4, 8, 2, ptr(dst), 8) }, "values [8, 10)")
	expect(t, StatusCorrupt, func() int32 { return ReaderReadValues(h, 9, 2, 2, ptr([]uint64{1}), 1, ptr(dst), 8) }, "takes 5 blocks; the file holds 3")
	expect(t, StatusCorrupt, func() int32 { return ReaderReadValues(h, 10, 2, 4, ptr([]uint64{9}), 1, ptr(dst), 8) }, "column block 2: values 8 to 9")
	expect(t, StatusInvalid, func() int32 { return ReaderReadValues(h, 9, 0, 4, nil, 0, nil, 0) }, "at least 1")
	expect(t, StatusShortBuf, func() int32 { return ReaderReadValueRange(h, 9, 2, 4, 0, 9, ptr(dst), 8) })
	expect(t, StatusInvalid, func() int32 { return ReaderReadValues(h, 9, 2, 4, nil, 1, ptr(dst), 8) }, "indices is NULL")
	expect(t, StatusInvalid, func() int32 { return ReaderReadValueRange(h, 9, 2, 4, 0, 1, nil, 8) }, "dst is NULL")
}

func TestReaderBadArguments(t *testing.T) {
	noLeaks(t)
	h := openReader(t, 0, golden("basic.ffr"))
	one := []uint64{1}
	sizes := make([]uint64, 1)
	reasons := make([]int32, 1)
	dst := make([]byte, 8)
	var out uint64
	var needed uintptr
	for _, tt := range []struct {
		name string
		call func() int32
		says string
	}{
		{"sizes: indices", func() int32 { return ReaderSizes(h, nil, 1, ptr(sizes)) }, "indices is NULL"},
		{"sizes: sizes", func() int32 { return ReaderSizes(h, ptr(one), 1, nil) }, "sizes is NULL"},
		{"read: indices", func() int32 { return ReaderReadBatch(h, nil, 1, ptr(dst), 8, ptr(sizes)) }, "indices is NULL"},
		{"read: sizes", func() int32 { return ReaderReadBatch(h, ptr(one), 1, ptr(dst), 8, nil) }, "sizes is NULL"},
		{"read: dst", func() int32 { return ReaderReadBatch(h, ptr(one), 1, nil, 8, ptr(sizes)) }, "dst is NULL"},
		{"read: huge n", func() int32 { return ReaderReadBatch(h, ptr(one), 1<<62, ptr(dst), 8, ptr(sizes)) }, "larger than any buffer"},
		{"read: huge dst", func() int32 { return ReaderReadBatch(h, ptr(one), 1, ptr(dst), 1<<63, ptr(sizes)) }, "larger than any buffer"},
		{"len", func() int32 { return ReaderLen(h, nil) }, "n is NULL"},
		{"nfiles", func() int32 { return ReaderNfiles(h, nil) }, "nfiles is NULL"},
		{"descriptors", func() int32 { return ReaderDescriptors(h, nil) }, "count is NULL"},
		{"fname", func() int32 { return ReaderFname(h, 0, ptr(dst), 8, nil) }, "needed is NULL"},
		{"warnings", func() int32 { return ReaderWarnings(h, ptr(dst), 8, nil) }, "needed is NULL"},
		{"file counts", func() int32 { return ReaderFileCounts(h, nil, 1) }, "counts is NULL"},
		{"verify: nbad", func() int32 {
			return ReaderVerify(h, 0, 1, ptr(sizes), ptr(reasons), 1, nil, 0, nil, unsafe.Pointer(&out))
		}, "nbad is NULL"},
		{"verify: next", func() int32 {
			return ReaderVerify(h, 0, 1, ptr(sizes), ptr(reasons), 1, nil, 0, unsafe.Pointer(&out), nil)
		}, "next is NULL"},
		{"verify: bad", func() int32 {
			return ReaderVerify(h, 0, 1, nil, ptr(reasons), 1, nil, 0, unsafe.Pointer(&out), unsafe.Pointer(&out))
		}, "bad is NULL"},
		{"verify: reasons", func() int32 {
			return ReaderVerify(h, 0, 1, ptr(sizes), nil, 1, nil, 0, unsafe.Pointer(&out), unsafe.Pointer(&out))
		}, "reasons is NULL"},
		{"verify: text", func() int32 {
			return ReaderVerify(h, 0, 1, nil, nil, 0, nil, 8, unsafe.Pointer(&out), unsafe.Pointer(&out))
		}, "text is NULL"},
		{"file info", func() int32 { return ReaderFileInfo(h, 0, nil, 2) }, "info is NULL"},
		{"open: paths", func() int32 { return ReaderOpen(nil, 1, 0, unsafe.Pointer(&out)) }, "paths is NULL"},
		{"open: a path", func() int32 {
			return ReaderOpen(ptr([]unsafe.Pointer{cstr(golden("basic.ffr")), nil}), 2, 0, unsafe.Pointer(&out))
		}, "paths[1] is NULL"},
		{"open: handle", func() int32 { return ReaderOpen(ptr([]unsafe.Pointer{cstr(golden("basic.ffr"))}), 1, 0, nil) }, "handle is NULL"},
		{"open: flags", func() int32 {
			return ReaderOpen(ptr([]unsafe.Pointer{cstr(golden("basic.ffr"))}), 1, 8|FlagCheckData, unsafe.Pointer(&out))
		}, "unknown flags 0x8"},
	} {
		t.Run(tt.name, func(t *testing.T) { expect(t, StatusInvalid, tt.call, tt.says) })
	}
	expect(t, StatusShortBuf, func() int32 { return ReaderFname(h, 0, ptr(dst), 8, unsafe.Pointer(&needed)) })
	if want := golden("basic.ffr"); needed != uintptr(len(want)) || string(dst) != want[:7]+"\x00" {
		t.Errorf("truncated name %q, needed %d; want %q, %d", dst, needed, want[:7], len(want))
	}
	name := golden("basic.ffr")
	exact := make([]byte, len(name)) // room for the name but not its NUL
	expect(t, StatusShortBuf, func() int32 {
		return ReaderFname(h, 0, ptr(exact), uintptr(len(exact)), unsafe.Pointer(&needed))
	})
	if string(exact) != name[:len(name)-1]+"\x00" {
		t.Errorf("name in a buffer one byte short: %q", exact)
	}
	expect(t, StatusShortBuf, func() int32 { return ReaderFileCounts(h, ptr(sizes), 0) }, "1 files")
	counts := []uint64{7, 7, 7}
	must(t, func() int32 { return ReaderFileCounts(h, ptr(counts), 3) })
	if !slices.Equal(counts, []uint64{25, 7, 7}) {
		t.Errorf("counts %v, want [25 7 7] (room beyond nfiles left alone)", counts)
	}
}

func TestReaderOpenFailures(t *testing.T) {
	noLeaks(t)
	empty := t.TempDir()
	missing := filepath.Join(empty, "missing.ffr")
	for _, tt := range []struct {
		name   string
		paths  []string
		flags  uint32
		status int32
		says   []string
	}{
		{"missing file", []string{missing}, FlagCheckData, StatusNotFound, []string{missing}},
		{"missing among others", []string{golden("basic.ffr"), missing}, 0, StatusNotFound, []string{missing}},
		{"empty directory", []string{empty}, 0, StatusInvalid, []string{empty}},
		{"no paths", nil, 0, StatusInvalid, nil},
		{"header cut short", []string{golden("truncated_header.ffr")}, 0, StatusCorrupt, []string{"truncated_header.ffr"}},
		{"header cut short, checked", []string{golden("truncated_header.ffr")}, FlagCheckData, StatusCorrupt, []string{"truncated_header.ffr"}},
		{"metadata checksum", []string{golden("corrupt_header.ffr")}, FlagCheckData, StatusChecksum, []string{"corrupt_header.ffr", "checksum"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, r := tryOpen(tt.flags, tt.paths...)
			if r.status != tt.status {
				t.Fatalf("status %d (%s), want %d", r.status, r.msg, tt.status)
			}
			for _, s := range tt.says {
				if !strings.Contains(r.msg, s) {
					t.Errorf("message %q does not mention %q", r.msg, s)
				}
			}
		})
	}
}

func TestReaderCorruptSample(t *testing.T) {
	noLeaks(t)
	m := loadManifest(t)
	checked := openReader(t, FlagCheckData, golden("corrupt_sample.ffr"))
	sizes := make([]uint64, 1)
	dst := make([]byte, 256)
	expect(t, StatusChecksum, func() int32 {
		return ReaderReadBatch(checked, ptr([]uint64{2}), 1, ptr(dst), uint64(len(dst)), ptr(sizes))
	}, "corrupt_sample.ffr", "sample 2", "checksum")
	for _, i := range []uint64{1, 3, 24} {
		if s := readBatch(t, checked, i)[0]; sha(s) != m.Files["basic.ffr"].Samples[i].Sha256 {
			t.Errorf("sample %d of corrupt_sample.ffr is not basic.ffr's", i)
		}
	}
	unchecked := openReader(t, 0, golden("corrupt_sample.ffr"))
	if s := readBatch(t, unchecked, 2)[0]; len(s) != 256 || sha(s) == m.Files["basic.ffr"].Samples[2].Sha256 {
		t.Errorf("unchecked read of the damaged sample: %d bytes, sha %s", len(s), sha(s))
	}

	for _, h := range []int64{checked, unchecked} {
		page := verifyOK(t, h, 0, 25, 2, 4096)
		if !slices.Equal(page.bad, []uint64{2}) || !slices.Equal(page.reasons, []int32{StatusChecksum}) || page.next != 25 {
			t.Errorf("verify: %+v; want bad [2], a checksum reason and next 25", page)
		}
		if msg := page.messages[0]; !strings.Contains(msg, "corrupt_sample.ffr: sample 2: checksum mismatch: stored 0x") {
			t.Errorf("message %q", msg)
		}
		if page := verifyOK(t, h, 0, 25, 0, 0); len(page.bad) != 0 || page.next != 2 {
			t.Errorf("verify with no room: %+v; want nothing and next 2", page)
		}
		if page := verifyOK(t, h, 0, 25, 1, 0); !slices.Equal(page.bad, []uint64{2}) || page.messages != nil {
			t.Errorf("verify without text: %+v; want bad [2] and no messages", page)
		}
		if page := verifyOK(t, h, 3, 22, 1, 100); len(page.bad) != 0 || page.next != 25 {
			t.Errorf("verify of [3, 25): %+v", page)
		}
	}
}

// verifyPage is what one ReaderVerify call filled in.
type verifyPage struct {
	bad      []uint64
	reasons  []int32
	messages []string // nil when no text buffer was given
	next     uint64
}

// verifyCall calls ReaderVerify with room for capacity bad samples and textLen bytes of
// messages.
func verifyCall(h int64, start, count, capacity uint64, textLen int) (verifyPage, result) {
	bad, reasons, text := make([]uint64, capacity), make([]int32, capacity), make([]byte, textLen)
	var nbad, next uint64
	r := call(func() int32 {
		return ReaderVerify(h, start, count, ptr(bad), ptr(reasons), capacity, ptr(text), uintptr(textLen),
			unsafe.Pointer(&nbad), unsafe.Pointer(&next))
	})
	page := verifyPage{bad: bad[:nbad], reasons: reasons[:nbad], next: next}
	if textLen > 0 {
		page.messages = strings.SplitN(string(text), "\x00", int(nbad)+1)[:nbad]
	}
	return page, r
}

// verifyOK is verifyCall that must succeed.
func verifyOK(t *testing.T, h int64, start, count, capacity uint64, textLen int) verifyPage {
	t.Helper()
	page, r := verifyCall(h, start, count, capacity, textLen)
	if r.status != StatusOK {
		t.Fatalf("verify [%d, %d+%d): status %d: %s", start, start, count, r.status, r.msg)
	}
	return page
}

func TestReaderVerifyClean(t *testing.T) {
	noLeaks(t)
	h := openReader(t, 0, golden("basic.ffr"))
	if page := verifyOK(t, h, 0, 25, 4, 100); len(page.bad) != 0 || page.next != 25 {
		t.Errorf("basic.ffr: %+v", page)
	}
}

// TestReaderVerifyPages takes the bad samples of three damaged files one page at a time,
// the pages cut short by the room for indices or for messages.
func TestReaderVerifyPages(t *testing.T) {
	noLeaks(t)
	c := golden("corrupt_sample.ffr")
	h := openReader(t, 0, c, c, c)
	var lengths []int
	for _, msg := range verifyOK(t, h, 0, 75, 3, 4096).messages {
		lengths = append(lengths, len(msg))
	}
	if len(lengths) != 3 || lengths[1] != lengths[2] {
		t.Fatalf("message lengths %v: want three, the last two alike", lengths)
	}
	for _, tt := range []struct {
		name     string
		capacity uint64
		textLen  int
		pages    [][]uint64
	}{
		{"one index", 1, 4096, [][]uint64{{2}, {27}, {52}}},
		{"two indices", 2, 4096, [][]uint64{{2, 27}, {52}}},
		{"room for all", 3, 4096, [][]uint64{{2, 27, 52}}},
		{"text for one message", 3, lengths[0] + 1 + lengths[1], [][]uint64{{2}, {27}, {52}}},
		{"text for two messages", 3, lengths[0] + 1 + lengths[1] + 1, [][]uint64{{2, 27}, {52}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			next := uint64(0)
			for k, want := range tt.pages {
				page := verifyOK(t, h, next, 75-next, tt.capacity, tt.textLen)
				if !slices.Equal(page.bad, want) || len(page.messages) != len(want) {
					t.Fatalf("page %d from %d: %+v, want bad %v", k, next, page, want)
				}
				for i, msg := range page.messages {
					if !strings.Contains(msg, fmt.Sprintf(": sample %d: checksum mismatch", want[i]%25)) {
						t.Errorf("page %d: message %q is not about sample %d", k, msg, want[i])
					}
				}
				next = page.next
			}
			if next != 75 {
				t.Fatalf("next %d after the last page, want 75", next)
			}
		})
	}
	page, r := verifyCall(h, 0, 75, 3, lengths[0]) // no room for a message and its NUL
	if r.status != StatusShortBuf || len(page.bad) != 0 || page.next != 2 || !strings.Contains(r.msg, "sample 2") {
		t.Errorf("text too short for one message: status %d (%s), %+v", r.status, r.msg, page)
	}
}

// TestReaderVerifyRange: a range beyond the dataset is FFR_E_INDEX however start+count
// overflows 64 bits.
func TestReaderVerifyRange(t *testing.T) {
	noLeaks(t)
	h := openReader(t, 0, golden("corrupt_sample.ffr"))
	const huge = math.MaxUint64
	for _, tt := range []struct {
		start, count uint64
		ok           bool
	}{
		{0, 25, true}, {25, 0, true}, {24, 1, true}, {0, 0, true},
		{0, 26, false}, {25, 1, false}, {26, 0, false}, {1, huge, false}, {huge, 1, false},
		{huge, huge, false}, {0, huge, false}, {2, huge - 1, false},
	} {
		page, r := verifyCall(h, tt.start, tt.count, 4, 0)
		switch {
		case tt.ok && (r.status != StatusOK || page.next != tt.start+tt.count):
			t.Errorf("[%d, %d+%d): status %d (%s), next %d", tt.start, tt.start, tt.count, r.status, r.msg, page.next)
		case !tt.ok && (r.status != StatusIndex || len(page.bad) != 0):
			t.Errorf("[%d, %d+%d): status %d, %+v; want FFR_E_INDEX and nothing", tt.start, tt.start, tt.count, r.status, page)
		}
	}
}

// TestReaderVerifyDamagedMetadata: the samples are still checked, and reported, before
// the metadata error comes back, on every page that covers the file.
func TestReaderVerifyDamagedMetadata(t *testing.T) {
	noLeaks(t)
	h := openReader(t, 0, golden("corrupt_header.ffr")) // offsets[1] has a flipped bit
	for range 2 {
		page, r := verifyCall(h, 0, 25, 3, 4096)
		if r.status != StatusChecksum || !strings.Contains(r.msg, "corrupt_header.ffr") || !strings.Contains(r.msg, "metadata") {
			t.Fatalf("status %d (%s), want the metadata checksum error", r.status, r.msg)
		}
		// Moving the boundary between samples 0 and 1 spoils both of them.
		if !slices.Equal(page.bad, []uint64{0, 1}) || page.next != 25 {
			t.Errorf("%+v; want bad [0 1] and next 25", page)
		}
	}
}

func TestReaderFileInfo(t *testing.T) {
	noLeaks(t)
	lz4 := filepath.Join(t.TempDir(), "z.ffr")
	writeFile(t, lz4, 2, CompressLZ4, [][]byte{make([]byte, 4000), []byte("x")})
	h := openReader(t, 0, golden("basic.ffr"), lz4, golden("legacy_zero_checksum.ffr"))
	size := func(path string) uint64 {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return uint64(st.Size())
	}
	for i, want := range [][InfoFields]uint64{
		{25, 25, uint64(CompressNone), 12 + 12*25, size(golden("basic.ffr")) - 312, size(golden("basic.ffr")), MetadataIntact, ReadLocal},
		{2, 3, uint64(CompressLZ4), 12 + 12*3, size(lz4) - 48, size(lz4), MetadataIntact, ReadLocal},
		{25, 25, uint64(CompressNone), 312, size(golden("legacy_zero_checksum.ffr")) - 312,
			size(golden("legacy_zero_checksum.ffr")), MetadataLegacy, ReadLocal},
	} {
		got := make([]uint64, InfoFields+1)
		got[InfoFields] = 99
		must(t, func() int32 { return ReaderFileInfo(h, uint64(i), ptr(got), uint64(len(got))) })
		if !slices.Equal(got[:InfoFields], want[:]) || got[InfoFields] != 99 {
			t.Errorf("file %d: %v, want %v and the extra entry left alone", i, got, want)
		}
	}
	two := make([]uint64, 2)
	must(t, func() int32 { return ReaderFileInfo(h, 1, ptr(two), 2) })
	if !slices.Equal(two, []uint64{2, 3}) {
		t.Errorf("two fields: %v", two)
	}
	expect(t, StatusIndex, func() int32 { return ReaderFileInfo(h, 3, ptr(two), 2) }, "file 3")
}

func TestReaderFileStamp(t *testing.T) {
	noLeaks(t)
	h := openReader(t, 0, golden("basic.ffr"), golden("legacy_zero_checksum.ffr"))
	raw, err := os.ReadFile(golden("basic.ffr"))
	if err != nil {
		t.Fatal(err)
	}
	var stamp [3]uint64
	must(t, func() int32 { return ReaderFileStamp(h, 0, unsafe.Pointer(&stamp[0])) })
	want := [3]uint64{uint64(len(raw)), 25, uint64(binary.LittleEndian.Uint32(raw))}
	if stamp != want || stamp[2] == 0 {
		t.Errorf("stamp %v, want the size, the stored count and the stored checksum %v", stamp, want)
	}
	must(t, func() int32 { return ReaderFileStamp(h, 1, unsafe.Pointer(&stamp[0])) })
	if stamp[2] != 0 {
		t.Errorf("legacy file: checksum %#x, want 0", stamp[2])
	}
	expect(t, StatusIndex, func() int32 { return ReaderFileStamp(h, 2, unsafe.Pointer(&stamp[0])) }, "file 2")
	expect(t, StatusInvalid, func() int32 { return ReaderFileStamp(h, 0, nil) }, "stamp is NULL")
}

func TestReaderFileHeader(t *testing.T) {
	noLeaks(t)
	lz4 := filepath.Join(t.TempDir(), "z.ffr")
	writeFile(t, lz4, 2, CompressLZ4, [][]byte{make([]byte, 4000), []byte("x")})
	h := openReader(t, 0, golden("basic.ffr"), lz4)
	offsets, checksums := make([]uint64, 26), make([]uint32, 25)
	must(t, func() int32 { return ReaderFileHeader(h, 0, ptr(offsets), ptr(checksums), 25) })
	st, err := os.Stat(golden("basic.ffr"))
	if err != nil {
		t.Fatal(err)
	}
	if offsets[0] != 12+12*25 || offsets[25] != uint64(st.Size()) || !slices.IsSorted(offsets) {
		t.Errorf("offsets %v: want the data start first, sorted, the file size last", offsets)
	}
	// A compressed file shows its stored tables, extension record included (3 entries).
	expect(t, StatusShortBuf, func() int32 { return ReaderFileHeader(h, 1, ptr(offsets), ptr(checksums), 2) }, "stores 3 samples")
	must(t, func() int32 { return ReaderFileHeader(h, 1, ptr(offsets), ptr(checksums), 3) })
	expect(t, StatusIndex, func() int32 { return ReaderFileHeader(h, 2, ptr(offsets), ptr(checksums), 25) }, "file 2")
	expect(t, StatusInvalid, func() int32 { return ReaderFileHeader(h, 0, nil, ptr(checksums), 25) }, "offsets is NULL")
	expect(t, StatusInvalid, func() int32 { return ReaderFileHeader(h, 0, ptr(offsets), nil, 25) }, "checksums is NULL")
}

func TestReaderTruncatedData(t *testing.T) {
	noLeaks(t)
	m := loadManifest(t)
	for _, flags := range []uint32{0, FlagCheckData} {
		h := openReader(t, flags, golden("truncated.ffr"))
		if s := readBatch(t, h, 1)[0]; sha(s) != m.Files["basic.ffr"].Samples[1].Sha256 {
			t.Errorf("flags %d: sample 1 before the cut differs", flags)
		}
		sizes := make([]uint64, 1)
		dst := make([]byte, 1<<20)
		for _, i := range []uint64{2, 5, 24} {
			expect(t, StatusCorrupt, func() int32 {
				return ReaderReadBatch(h, ptr([]uint64{i}), 1, ptr(dst), uint64(len(dst)), ptr(sizes))
			}, "truncated.ffr")
		}
	}
}

func TestReaderLegacyChecksumWarns(t *testing.T) {
	noLeaks(t)
	m := loadManifest(t)
	h := openReader(t, FlagCheckData, golden("legacy_zero_checksum.ffr"))
	warnings := readText(t, func(buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) int32 {
		return ReaderWarnings(h, buf, size, needed)
	})
	if !strings.Contains(warnings, "legacy_zero_checksum.ffr") || !strings.Contains(warnings, "checksum") {
		t.Errorf("warnings %q do not name the file and its checksum", warnings)
	}
	indices := make([]uint64, 25)
	for i := range indices {
		indices[i] = uint64(i)
	}
	for i, s := range readBatch(t, h, indices...) {
		if sha(s) != m.Files["basic.ffr"].Samples[i].Sha256 {
			t.Errorf("sample %d differs from basic.ffr's", i)
		}
	}
}

func TestReaderHandles(t *testing.T) {
	noLeaks(t)
	writer := func() int64 {
		var w int64
		must(t, func() int32 {
			return WriterCreate(cstr(filepath.Join(t.TempDir(), "w.ffr")), 0, CompressNone, unsafe.Pointer(&w))
		})
		return w
	}()
	defer WriterAbort(writer)
	h, r := tryOpen(0, golden("basic.ffr"))
	if r.status != StatusOK {
		t.Fatal(r.msg)
	}
	must(t, func() int32 { return ReaderClose(h) })
	must(t, func() int32 { return ReaderClose(h) }) // closing twice is allowed
	one := []uint64{0}
	var out uint64
	var needed uintptr
	calls := map[string]func(h int64) int32{
		"len":         func(h int64) int32 { return ReaderLen(h, unsafe.Pointer(&out)) },
		"nfiles":      func(h int64) int32 { return ReaderNfiles(h, unsafe.Pointer(&out)) },
		"descriptors": func(h int64) int32 { return ReaderDescriptors(h, unsafe.Pointer(&out)) },
		"fname":       func(h int64) int32 { return ReaderFname(h, 0, nil, 0, unsafe.Pointer(&needed)) },
		"counts":      func(h int64) int32 { return ReaderFileCounts(h, unsafe.Pointer(&out), 1) },
		"warnings":    func(h int64) int32 { return ReaderWarnings(h, nil, 0, unsafe.Pointer(&needed)) },
		"sizes":       func(h int64) int32 { return ReaderSizes(h, ptr(one), 1, unsafe.Pointer(&out)) },
		"read":        func(h int64) int32 { return ReaderReadBatch(h, ptr(one), 1, nil, 0, unsafe.Pointer(&out)) },
		"verify": func(h int64) int32 {
			return ReaderVerify(h, 0, 1, nil, nil, 0, nil, 0, unsafe.Pointer(&out), unsafe.Pointer(&out))
		},
		"info":   func(h int64) int32 { return ReaderFileInfo(h, 0, nil, 0) },
		"header": func(h int64) int32 { return ReaderFileHeader(h, 0, nil, nil, 0) },
	}
	for name, f := range calls {
		expect(t, StatusClosed, func() int32 { return f(h) }, "closed")
		for _, never := range []int64{0, -h, h + 1<<40, writer} {
			if r := call(func() int32 { return f(never) }); r.status != StatusHandle || !strings.Contains(r.msg, "not a reader handle") {
				t.Errorf("%s(%d): status %d %q, want %d", name, never, r.status, r.msg, StatusHandle)
			}
		}
	}
	expect(t, StatusHandle, func() int32 { return ReaderClose(writer) }, "not a reader handle")
	expect(t, StatusHandle, func() int32 { return ReaderClose(0) }, "not a reader handle")
}

// TestReaderFnameUsesUTF8Bytes opens a file whose name is not ASCII and gets the same
// bytes back.
func TestReaderFnameUsesUTF8Bytes(t *testing.T) {
	noLeaks(t)
	path := filepath.Join(t.TempDir(), "données-🙂.ffr")
	writeFile(t, path, 1, CompressNone, [][]byte{[]byte("x")})
	h := openReader(t, 0, path)
	names, _ := readerFiles(t, h)
	if names[0] != path {
		t.Errorf("name %q, want %q", names[0], path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Error(err)
	}
}

// TestReaderReadSpan: a run of samples across files comes back as data and offsets equal
// to a batch of the same samples; a short buffer fills the offsets and reads nothing; bad
// runs and NULL arrays are refused naming what is wrong.
func TestReaderReadSpan(t *testing.T) {
	noLeaks(t)
	parts := []string{golden("multi/PART_00000.ffr"), golden("multi/PART_00001.ffr"), golden("multi/PART_00002.ffr")}
	h := openReader(t, FlagCheckData, parts...)
	var n uint64
	must(t, func() int32 { return ReaderLen(h, unsafe.Pointer(&n)) })
	indices := make([]uint64, n)
	for k := range indices {
		indices[k] = uint64(k)
	}
	want := readBatch(t, h, indices...)
	offsets := make([]uint64, n+1)
	expect(t, StatusShortBuf, func() int32 { return ReaderReadSpan(h, 0, n, nil, 0, ptr(offsets)) })
	dst := bytes.Repeat([]byte{0xEE}, int(offsets[n])-1)
	expect(t, StatusShortBuf, func() int32 { return ReaderReadSpan(h, 0, n, ptr(dst), uint64(len(dst)), ptr(offsets)) })
	if bytes.Count(dst, []byte{0xEE}) != len(dst) {
		t.Error("a short buffer was written to")
	}
	dst = make([]byte, offsets[n])
	must(t, func() int32 { return ReaderReadSpan(h, 0, n, ptr(dst), uint64(len(dst)), ptr(offsets)) })
	for k := range want {
		if !bytes.Equal(dst[offsets[k]:offsets[k+1]], want[k]) {
			t.Fatalf("sample %d of the span differs from the batch's", k)
		}
	}
	must(t, func() int32 { return ReaderReadSpan(h, n, 0, nil, 0, ptr(offsets)) })
	expect(t, StatusIndex, func() int32 { return ReaderReadSpan(h, 1, n, ptr(dst), uint64(len(dst)), ptr(offsets)) },
		fmt.Sprintf("samples [1, %d)", n+1))
	expect(t, StatusInvalid, func() int32 { return ReaderReadSpan(h, 0, 1, ptr(dst), 8, nil) }, "offsets is NULL")
	expect(t, StatusInvalid, func() int32 { return ReaderReadSpan(h, 0, ^uint64(0), ptr(dst), 8, ptr(offsets)) }, "larger than any")
}
