package remote

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// fakeMultipart records the multipart calls of one upload; failPart fails that part
// number with a 400 (not retryable).
type fakeMultipart struct {
	mu                 sync.Mutex
	parts              map[string]int // part number -> bytes
	completed, aborted bool
	failPart           string
}

func (f *fakeMultipart) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodPost && q.Has("uploads"):
		fmt.Fprint(w, `<InitiateMultipartUploadResult><UploadId>u1</UploadId></InitiateMultipartUploadResult>`)
	case r.Method == http.MethodPut && q.Get("uploadId") == "u1":
		n, _ := io.Copy(io.Discard, r.Body)
		if q.Get("partNumber") == f.failPart {
			http.Error(w, "no", 400)
			return
		}
		f.parts[q.Get("partNumber")] = int(n)
		w.Header().Set("ETag", `"e`+q.Get("partNumber")+`"`)
	case r.Method == http.MethodPost && q.Get("uploadId") == "u1":
		f.completed = true
		fmt.Fprint(w, `<CompleteMultipartUploadResult/>`)
	case r.Method == http.MethodDelete && q.Get("uploadId") == "u1":
		f.aborted = true
		w.WriteHeader(204)
	default:
		http.Error(w, "unexpected "+r.Method+" "+r.URL.String(), 400)
	}
}

func TestUploadInPartsCompletesOrAborts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.ffr")
	if err := os.WriteFile(path, pattern(2*minPart+123), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, failPart := range []string{"", "2"} {
		f := &fakeMultipart{parts: map[string]int{}, failPart: failPart}
		srv := httptest.NewServer(f)
		c := testClient(t, Options{EndpointURL: srv.URL, Anonymous: true})
		err := c.Upload(path, "s3://bkt/out/big.ffr")
		srv.Close()
		if failPart == "" {
			if err != nil || !f.completed || f.aborted || len(f.parts) != 3 || f.parts["3"] != 123 {
				t.Fatalf("upload: %v, parts %v, completed %v, aborted %v", err, f.parts, f.completed, f.aborted)
			}
			continue
		}
		if err == nil || f.completed || !f.aborted {
			t.Fatalf("a failed part: %v, completed %v, aborted %v; want an error and an abort", err, f.completed, f.aborted)
		}
	}
}
