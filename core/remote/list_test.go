package remote

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

func TestListPagesThroughAPrefixInKeyOrder(t *testing.T) {
	pages := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/bkt/" || q.Get("list-type") != "2" || q.Get("prefix") != "data/" {
			http.Error(w, "unexpected "+r.URL.String(), 400)
			return
		}
		pages++
		if q.Get("continuation-token") == "" {
			fmt.Fprint(w, `<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t2</NextContinuationToken>
<Contents><Key>data/b.ffr</Key></Contents><Contents><Key>data/notes.txt</Key></Contents></ListBucketResult>`)
			return
		}
		fmt.Fprint(w, `<ListBucketResult><IsTruncated>false</IsTruncated>
<Contents><Key>data/a.ffr</Key></Contents><Contents><Key>data/.tmp.ffr</Key></Contents></ListBucketResult>`)
	}))
	defer srv.Close()
	c := testClient(t, Options{EndpointURL: srv.URL, Anonymous: true})
	notes := func(name string) bool { return name != "notes.txt" }
	got, err := c.List("s3://bkt/data", notes)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"s3://bkt/data/.tmp.ffr", "s3://bkt/data/a.ffr", "s3://bkt/data/b.ffr"}; !slices.Equal(got, want) || pages != 2 {
		t.Fatalf("listed %v in %d pages, want %v in 2", got, pages, want)
	}
	if _, err := c.List("https://host/dir/", notes); err == nil {
		t.Fatal("listing a plain HTTP URL succeeded")
	}
}

func TestEntriesNameObjectsAndSubdirectoriesUnderAPrefix(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("prefix") != "ds/" || q.Get("delimiter") != "/" {
			http.Error(w, "unexpected "+r.URL.String(), 400)
			return
		}
		if q.Get("continuation-token") == "" {
			fmt.Fprint(w, `<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t2</NextContinuationToken>
<Contents><Key>ds/spec.json</Key></Contents><CommonPrefixes><Prefix>ds/000001/</Prefix></CommonPrefixes></ListBucketResult>`)
			return
		}
		fmt.Fprint(w, `<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>ds/</Key></Contents>
<CommonPrefixes><Prefix>ds/000000/</Prefix></CommonPrefixes></ListBucketResult>`)
	}))
	defer srv.Close()
	c := testClient(t, Options{EndpointURL: srv.URL, Anonymous: true})
	got, err := c.Entries("s3://bkt/ds")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"000000/", "000001/", "spec.json"}; !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	if _, err := c.Entries("http://host/ds/"); err == nil {
		t.Fatal("listing a plain HTTP URL succeeded")
	}
}

func TestObjectsListsNamesSizesAndETagsOfObjectsOnly(t *testing.T) {
	pages := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("prefix") != "ds/_manifest/" || q.Get("delimiter") != "/" {
			http.Error(w, "unexpected "+r.URL.String(), 400)
			return
		}
		pages++
		if q.Get("continuation-token") == "" {
			fmt.Fprint(w, `<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t2</NextContinuationToken>
<Contents><Key>ds/_manifest/v000002.ffr</Key><Size>300</Size><ETag>&quot;b2&quot;</ETag></Contents>
<CommonPrefixes><Prefix>ds/_manifest/old/</Prefix></CommonPrefixes></ListBucketResult>`)
			return
		}
		fmt.Fprint(w, `<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>ds/_manifest/</Key><Size>0</Size></Contents>
<Contents><Key>ds/_manifest/v000001.ffr</Key><Size>200</Size><ETag>"a1"</ETag></Contents></ListBucketResult>`)
	}))
	defer srv.Close()
	c := testClient(t, Options{EndpointURL: srv.URL, Anonymous: true})
	got, listed, err := c.Objects("s3://bkt/ds/_manifest")
	if err != nil {
		t.Fatal(err)
	}
	want := []ObjectInfo{{"v000001.ffr", 200, "a1"}, {"v000002.ffr", 300, "b2"}}
	if !slices.Equal(got, want) || listed != 2 || pages != 2 {
		t.Fatalf("objects %v in %d pages (server: %d), want %v in 2", got, listed, pages, want)
	}
	if _, _, err := c.Objects("https://host/ds/"); err == nil {
		t.Fatal("listing a plain HTTP URL succeeded")
	}
}
