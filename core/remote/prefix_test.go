package remote

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Prefix gets the start of an object, its size and its ETag from one answer, whether the
// server honours the range or sends the whole object; an empty object costs a HEAD more.
func TestPrefixReadsTheStartSizeAndETagInOneRequest(t *testing.T) {
	object := bytes.Repeat([]byte("0123456789"), 10)
	for _, tc := range []struct {
		name        string
		body        []byte
		ranged      bool
		n, size     int64
		want        []byte
		wantRequest int
	}{
		{"ranged", object, true, 12, 100, object[:12], 1},
		{"whole answer", object, false, 12, 100, object[:12], 1},
		{"shorter than asked", object[:5], true, 12, 5, object[:5], 1},
		{"empty", nil, true, 12, 0, []byte{}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requests := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests++
				w.Header().Set("ETag", `"e1"`)
				if r.Method == http.MethodHead {
					w.Header().Set("Content-Length", fmt.Sprint(len(tc.body)))
					return
				}
				if len(tc.body) == 0 {
					w.Header().Set("Content-Range", "bytes */0")
					w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
					return
				}
				if !tc.ranged {
					_, _ = w.Write(tc.body)
					return
				}
				end := min(int64(len(tc.body)), tc.n) - 1
				w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-%d/%d", end, len(tc.body)))
				w.WriteHeader(http.StatusPartialContent)
				_, _ = w.Write(tc.body[:end+1])
			}))
			defer srv.Close()
			c := testClient(t, Options{EndpointURL: srv.URL, Anonymous: true})
			obj, err := c.Object("s3://bkt/key.ffr")
			if err != nil {
				t.Fatal(err)
			}
			data, size, etag, err := obj.Prefix(tc.n)
			if err != nil || !bytes.Equal(data, tc.want) || size != tc.size || etag != "e1" || requests != tc.wantRequest {
				t.Fatalf("got %q, size %d, etag %q, %v after %d requests", data, size, etag, err, requests)
			}
		})
	}
}
