package core

import (
	"errors"
	"os"
	"testing"
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
