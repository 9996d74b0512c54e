package abi

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"
)

// A store that lists two objects (and a sub-directory) under ds/_manifest/, and counts the
// requests.
func objectStore(t *testing.T) (options []byte, requests *int) {
	count := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count++
		switch {
		case r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2":
			fmt.Fprint(w, `<ListBucketResult><IsTruncated>false</IsTruncated>
<Contents><Key>ds/_manifest/v000002.ffr</Key><Size>300</Size><ETag>"b2"</ETag></Contents>
<Contents><Key>ds/_manifest/v000001.ffr</Key><Size>200</Size><ETag>"a1"</ETag></Contents>
<CommonPrefixes><Prefix>ds/_manifest/sub/</Prefix></CommonPrefixes></ListBucketResult>`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return append([]byte(fmt.Sprintf(`{"endpoint_url": %q, "anonymous": true}`, srv.URL)), 0), &count
}

func TestListObjectsGivesNamesSizesETagsAndRequests(t *testing.T) {
	opts, served := objectStore(t)
	url := append([]byte("s3://bkt/ds/_manifest/"), 0)
	var requests uint64
	got := listText(t, func(buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) int32 {
		return ListObjects(unsafe.Pointer(&url[0]), unsafe.Pointer(&opts[0]), buf, size, needed, unsafe.Pointer(&requests))
	})
	if want := "v000001.ffr\t200\ta1\nv000002.ffr\t300\tb2\n"; got != want || requests != 1 || *served != 1 {
		t.Fatalf("listed %q in %d requests (served %d), want %q in 1", got, requests, *served, want)
	}
	var needed uintptr
	status := ListObjects(unsafe.Pointer(&url[0]), unsafe.Pointer(&opts[0]), nil, 0, unsafe.Pointer(&needed), unsafe.Pointer(&requests))
	if status != StatusShortBuf || needed != uintptr(len("v000001.ffr\t200\ta1\nv000002.ffr\t300\tb2\n")) || requests != 1 {
		t.Fatalf("a short buffer: status %d, needed %d, %d requests", status, needed, requests)
	}
	expect(t, StatusInvalid, func() int32 {
		return ListObjects(unsafe.Pointer(&url[0]), nil, nil, 0, unsafe.Pointer(&needed), nil)
	}, "requests is NULL")
	https := append([]byte("https://host/ds/"), 0)
	expect(t, StatusInvalid, func() int32 {
		return ListObjects(unsafe.Pointer(&https[0]), unsafe.Pointer(&opts[0]), nil, 0, unsafe.Pointer(&needed), unsafe.Pointer(&requests))
	}, "only s3://")
}

func TestDescribeFileGivesSizeDigestAndETag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.ffr")
	writeFile(t, path, 2, CompressNone, [][]byte{[]byte("x"), []byte("yz")})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cpath := append([]byte(path), 0)
	version := make([]uint64, 3)
	etag := listText(t, func(buf unsafe.Pointer, length uintptr, needed unsafe.Pointer) int32 {
		return DescribeFile(unsafe.Pointer(&cpath[0]), nil, unsafe.Pointer(&version[0]), buf, length, needed)
	})
	want := []uint64{uint64(len(data)), 2, uint64(binary.LittleEndian.Uint32(data))}
	if etag != "" || !slices.Equal(version, want) {
		t.Fatalf("version %v, etag %q; want %v and no ETag", version, etag, want)
	}
	var needed uintptr
	short := filepath.Join(t.TempDir(), "short.ffr")
	if err := os.WriteFile(short, data[:5], 0o644); err != nil {
		t.Fatal(err)
	}
	cshort := append([]byte(short), 0)
	expect(t, StatusCorrupt, func() int32 {
		return DescribeFile(unsafe.Pointer(&cshort[0]), nil, unsafe.Pointer(&version[0]), nil, 0, unsafe.Pointer(&needed))
	}, "short.ffr", "too short")
	expect(t, StatusInvalid, func() int32 { return DescribeFile(nil, nil, nil, nil, 0, nil) }, "NULL")
}
