package core

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/ffrecord/ffrecord/core/remote"
)

func TestDatasetFilesSkipsHiddenFilesAndDirectories(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b.ffr", "a.ffr", ".hidden.ffr", ".a.ffr.tmp-1", "notes.txt", "c.ffr.bak"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "x.ffr"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := DatasetFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a.ffr"), filepath.Join(dir, "b.ffr")}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got, err := DatasetFiles(t.TempDir()); err != nil || len(got) != 0 {
		t.Fatalf("empty directory: got %q, %v", got, err)
	}
	if _, err := DatasetFiles(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatalf("missing directory: got %v", err)
	}
}

func TestPartNamesSortInPartOrder(t *testing.T) {
	for _, tc := range []struct {
		k, n uint64
		want string
	}{
		{0, 0, "PART_00000.ffr"}, {0, 1, "PART_00000.ffr"}, {3, 4, "PART_00003.ffr"},
		{99999, 100000, "PART_99999.ffr"}, {7, 100001, "PART_000007.ffr"},
		{100000, 100001, "PART_100000.ffr"}, {12, 1234567, "PART_0000012.ffr"},
	} {
		if got := PartName(tc.k, tc.n); got != tc.want {
			t.Errorf("PartName(%d, %d) = %q, want %q", tc.k, tc.n, got, tc.want)
		}
	}
	const n = 100002
	names := make([]string, n)
	for k := range names {
		names[k] = PartName(uint64(k), n)
	}
	if !sort.StringsAreSorted(names) {
		t.Fatal("part names of a 100,002-part dataset do not sort in part order")
	}
}

func TestDatasetURLsKeepWhatDatasetFilesWould(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<ListBucketResult><IsTruncated>false</IsTruncated>
<Contents><Key>ds/b.ffr</Key></Contents><Contents><Key>ds/.staged.ffr</Key></Contents>
<Contents><Key>ds/a.ffr</Key></Contents><Contents><Key>ds/notes.txt</Key></Contents></ListBucketResult>`)
	}))
	defer srv.Close()
	got, err := DatasetURLs("s3://bkt/ds/", remote.Options{EndpointURL: srv.URL, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"s3://bkt/ds/a.ffr", "s3://bkt/ds/b.ffr"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
