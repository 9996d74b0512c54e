package abi

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// listText calls a (…, buf, len, needed) function with a buffer of 4 KiB.
func listText(t *testing.T, f func(buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) int32) string {
	t.Helper()
	buf := make([]byte, 4096)
	var needed uintptr
	must(t, func() int32 { return f(unsafe.Pointer(&buf[0]), uintptr(len(buf)), unsafe.Pointer(&needed)) })
	return string(buf[:needed])
}

func TestDatasetFilesAndPartName(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"PART_00001.ffr", "PART_00000.ffr", ".PART_00002.ffr"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cdir := append([]byte(dir), 0)
	got := listText(t, func(buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) int32 {
		return DatasetFiles(unsafe.Pointer(&cdir[0]), buf, size, needed)
	})
	want := filepath.Join(dir, "PART_00000.ffr") + "\n" + filepath.Join(dir, "PART_00001.ffr") + "\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	name := listText(t, func(buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) int32 {
		return PartName(100000, 100001, buf, size, needed)
	})
	if name != "PART_100000.ffr" {
		t.Fatalf("part name %q", name)
	}
	missing := append([]byte(filepath.Join(dir, "missing")), 0)
	var needed uintptr
	expect(t, StatusNotFound, func() int32 { return DatasetFiles(unsafe.Pointer(&missing[0]), nil, 0, unsafe.Pointer(&needed)) }, "missing")
	expect(t, StatusInvalid, func() int32 { return DatasetFiles(nil, nil, 0, unsafe.Pointer(&needed)) }, "dir is NULL")
	expect(t, StatusInvalid, func() int32 { return DatasetURLs(nil, nil, nil, 0, unsafe.Pointer(&needed)) }, "url is NULL")
	bad := append([]byte(`{"timeout": "soon"}`), 0)
	prefix := append([]byte("s3://bkt/ds/"), 0)
	expect(t, StatusInvalid, func() int32 {
		return DatasetURLs(unsafe.Pointer(&prefix[0]), unsafe.Pointer(&bad[0]), nil, 0, unsafe.Pointer(&needed))
	}, "timeout")
}

// ffr_put_new refuses missing arguments and URLs it cannot write before any request.
func TestPutNewRefusesBadArguments(t *testing.T) {
	data := []byte("claim")
	url := append([]byte("https://example.invalid/x"), 0)
	expect(t, StatusInvalid, func() int32 { return PutNew(nil, nil, unsafe.Pointer(&data[0]), 5) }, "url or data is NULL")
	expect(t, StatusInvalid, func() int32 { return PutNew(unsafe.Pointer(&url[0]), nil, nil, 5) }, "url or data is NULL")
	expect(t, StatusInvalid, func() int32 { return PutNew(unsafe.Pointer(&url[0]), nil, unsafe.Pointer(&data[0]), 5) }, "only s3:// URLs can be written")
}
