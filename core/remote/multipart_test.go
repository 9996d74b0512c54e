package remote

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
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

// lostCompletion is a multipart endpoint that completes an upload and then drops the
// connection instead of answering, as a reply lost on the way back would look; a retried
// completion finds no such upload (404), as on S3. With stale set, it never completes, and
// HEAD shows an older object of the same size made of as many parts.
type lostCompletion struct {
	mu      sync.Mutex
	md5s    map[string][]byte // part number -> its MD5
	object  string            // the ETag of the object under the key ("": none)
	size    int64
	aborted bool
	stale   bool
}

func (l *lostCompletion) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodPost && q.Has("uploads"):
		fmt.Fprint(w, `<InitiateMultipartUploadResult><UploadId>u1</UploadId></InitiateMultipartUploadResult>`)
	case r.Method == http.MethodPut && q.Get("uploadId") == "u1":
		body, _ := io.ReadAll(r.Body)
		sum := md5.Sum(body)
		l.md5s[q.Get("partNumber")] = sum[:]
		l.size += int64(len(body))
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
	case r.Method == http.MethodPost && q.Get("uploadId") == "u1":
		if l.md5s == nil {
			http.Error(w, "<Error><Code>NoSuchUpload</Code></Error>", 404)
			return
		}
		if l.stale {
			l.object = "0123456789abcdef0123456789abcdef-3"
		} else {
			h := md5.New()
			for k := 1; k <= len(l.md5s); k++ {
				h.Write(l.md5s[strconv.Itoa(k)])
			}
			l.object = fmt.Sprintf("%x-%d", h.Sum(nil), len(l.md5s))
		}
		l.md5s = nil
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	case r.Method == http.MethodHead && l.object != "":
		w.Header().Set("Content-Length", strconv.FormatInt(l.size, 10))
		w.Header().Set("ETag", `"`+l.object+`"`)
	case r.Method == http.MethodDelete && q.Get("uploadId") == "u1":
		l.aborted = true
		w.WriteHeader(204)
	default:
		http.Error(w, "no such key", 404)
	}
}

func TestACompletionWhoseReplyIsLostIsCheckedByHead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.ffr")
	if err := os.WriteFile(path, pattern(2*minPart+123), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, stale := range []bool{false, true} {
		l := &lostCompletion{md5s: map[string][]byte{}, stale: stale}
		srv := httptest.NewServer(l)
		c := testClient(t, Options{EndpointURL: srv.URL, Anonymous: true, Retries: 1})
		err := c.Upload(path, "s3://bkt/out/big.ffr")
		srv.Close()
		if !stale && (err != nil || l.aborted) {
			t.Fatalf("a completed upload whose reply was lost: %v (aborted %v), want success", err, l.aborted)
		}
		if stale && (err == nil || !l.aborted) {
			t.Fatalf("HEAD showing another object: %v (aborted %v), want an error and an abort", err, l.aborted)
		}
	}
}
