package core

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ffrecord/ffrecord/core/remote"
)

// DescribeFile reads a file's stamp: its size and the count and checksum its header stores; a file
// shorter than a header is corrupt, a FIFO or a directory is refused at once.
func TestDescribeFileReadsTheHeadersDigest(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.ffr")
	writeSamples(t, path, [][]byte{[]byte("x"), []byte("yz")}, WriterOptions{})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, etag, err := DescribeFile(path, remote.Options{})
	want := FileStamp{Bytes: uint64(len(data)), Stored: 2, HeaderChecksum: binary.LittleEndian.Uint32(data)}
	if err != nil || got != want || want.HeaderChecksum == 0 || etag != "" {
		t.Fatalf("%+v, %q, %v; want %+v", got, etag, err, want)
	}
	short := filepath.Join(dir, "short.ffr")
	if err := os.WriteFile(short, data[:7], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := DescribeFile(short, remote.Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a 7-byte file: %v, want ErrCorrupt", err)
	}
	if _, _, err := DescribeFile(dir, remote.Options{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a directory: %v, want ErrInvalid", err)
	}
	if _, _, err := DescribeFile(filepath.Join(dir, "none.ffr"), remote.Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
}
