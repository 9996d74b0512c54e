package core

import (
	"errors"
	"hash/crc32"
	"io"
	"os"
	"testing"

	"github.com/ffrecord/ffrecord/core/remote"
)

func TestFileInfo(t *testing.T) {
	lz4 := tempPath(t, "z.ffr")
	writeSamples(t, lz4, [][]byte{make([]byte, 5000), []byte("x"), nil}, WriterOptions{Compression: CompressLZ4})
	size := func(path string) uint64 {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return uint64(st.Size())
	}
	for _, tt := range []struct {
		path    string
		samples uint64
		stored  uint64
		comp    Compression
		meta    MetadataState
	}{
		{"testdata/basic.ffr", 25, 25, CompressNone, MetadataIntact},
		{"testdata/legacy_zero_checksum.ffr", 25, 25, CompressNone, MetadataLegacy},
		{"testdata/corrupt_header.ffr", 25, 25, CompressNone, MetadataDamaged},
		{lz4, 3, 4, CompressLZ4, MetadataIntact},
	} {
		t.Run(tt.path, func(t *testing.T) {
			r := openReader(t, ReaderOptions{}, tt.path)
			info, err := r.FileInfo(0)
			if err != nil {
				t.Fatal(err)
			}
			header, _ := headerSize(tt.stored)
			want := FileInfo{Path: tt.path, Samples: tt.samples, Stored: tt.stored, Compression: tt.comp,
				HeaderBytes: header, DataBytes: size(tt.path) - header, FileBytes: size(tt.path), Metadata: tt.meta}
			if info != want {
				t.Fatalf("FileInfo = %+v\nwant       %+v", info, want)
			}
		})
	}
	r := openReader(t, ReaderOptions{}, "testdata/basic.ffr", lz4)
	if info, err := r.FileInfo(1); err != nil || info.Path != lz4 {
		t.Fatalf("FileInfo(1) = %+v, %v", info, err)
	}
	for _, k := range []int{-1, 2} {
		if _, err := r.FileInfo(k); !errors.Is(err, ErrIndex) {
			t.Errorf("FileInfo(%d): err = %v, want ErrIndex", k, err)
		}
	}
	_ = r.Close()
	if _, err := r.FileInfo(0); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: err = %v, want ErrClosed", err)
	}
}

func TestFileStamp(t *testing.T) {
	stampOf := func(path string) FileStamp {
		t.Helper()
		r := openReader(t, ReaderOptions{}, path)
		defer r.Close()
		stamp, err := r.FileStamp(0)
		if err != nil {
			t.Fatal(err)
		}
		return stamp
	}
	samples := [][]byte{[]byte("one"), []byte("two"), make([]byte, 5000)}
	a, copied, other := tempPath(t, "a.ffr"), tempPath(t, "copy.ffr"), tempPath(t, "other.ffr")
	writeSamples(t, a, samples, WriterOptions{})
	raw, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copied, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	writeSamples(t, other, [][]byte{[]byte("one"), []byte("TWO"), make([]byte, 5000)}, WriterOptions{})
	want := FileStamp{Bytes: uint64(len(raw)), Stored: 3, HeaderChecksum: crc32.ChecksumIEEE(raw[4 : 12+12*3])}
	if got := stampOf(a); got != want {
		t.Errorf("stamp %+v, want the size and the stored checksum %+v", got, want)
	}
	if described, etag, err := DescribeFile(a, remote.Options{}); err != nil || described != want || etag != "" {
		t.Errorf("DescribeFile: %+v, %q, %v; want the reader's stamp %+v", described, etag, err, want)
	}
	if stampOf(copied) != want {
		t.Error("a copy of the file has another stamp")
	}
	if stampOf(other) == want {
		t.Error("a file of the same size with another sample has the same stamp")
	}
	if got := stampOf("testdata/legacy_zero_checksum.ffr"); got.HeaderChecksum != 0 || got.Bytes == 0 {
		t.Errorf("legacy file: stamp %+v, want its size and checksum 0", got)
	}
	// The stamp is the file opened: replacing the path afterwards changes nothing.
	r := openReader(t, ReaderOptions{}, a)
	if err := os.Rename(other, a); err != nil {
		t.Fatal(err)
	}
	if got, err := r.FileStamp(0); err != nil || got != want {
		t.Errorf("after the path was replaced: %+v, %v; want %+v", got, err, want)
	}
	if _, err := r.FileStamp(1); !errors.Is(err, ErrIndex) {
		t.Errorf("FileStamp(1): err = %v, want ErrIndex", err)
	}
	_ = r.Close()
	if _, err := r.FileStamp(0); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: err = %v, want ErrClosed", err)
	}
}

func TestFileHeader(t *testing.T) {
	path := tempPath(t, "h.ffr")
	samples := [][]byte{[]byte("first"), nil, []byte("third one")}
	writeSamples(t, path, samples, WriterOptions{})
	r := openReader(t, ReaderOptions{}, path)
	offsets, checksums := make([]uint64, 4), make([]uint32, 3)
	if err := r.FileHeader(0, offsets, checksums); err != nil {
		t.Fatal(err)
	}
	header, _ := headerSize(3)
	wantOffsets := []uint64{header, header + 5, header + 5, header + 14}
	for i, sample := range samples {
		if offsets[i] != wantOffsets[i] || checksums[i] != crc32.ChecksumIEEE(sample) {
			t.Errorf("sample %d: offset %d checksum %#x, want %d %#x",
				i, offsets[i], checksums[i], wantOffsets[i], crc32.ChecksumIEEE(sample))
		}
	}
	if offsets[3] != wantOffsets[3] {
		t.Errorf("end offset %d, want the file size %d", offsets[3], wantOffsets[3])
	}
	if err := r.FileHeader(0, offsets[:3], checksums); !errors.Is(err, io.ErrShortBuffer) {
		t.Errorf("short offsets: err = %v, want io.ErrShortBuffer", err)
	}
	if err := r.FileHeader(1, offsets, checksums); !errors.Is(err, ErrIndex) {
		t.Errorf("file 1: err = %v, want ErrIndex", err)
	}
	_ = r.Close()
	if err := r.FileHeader(0, offsets, checksums); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: err = %v, want ErrClosed", err)
	}
}
