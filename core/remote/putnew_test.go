package remote

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// conditionalStore answers PUT with If-None-Match: * as S3 does (412 when the key is
// taken) and GET with what it holds; loseNext makes it store a PUT but answer 500, as a
// response lost on the way back would look to the client.
type conditionalStore struct {
	mu       sync.Mutex
	objects  map[string][]byte
	loseNext bool
}

func (s *conditionalStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	held, ok := s.objects[r.URL.Path]
	switch r.Method {
	case http.MethodPut:
		if r.Header.Get("If-None-Match") != "*" {
			http.Error(w, "unconditional PUT", http.StatusBadRequest)
			return
		}
		if ok {
			http.Error(w, "PreconditionFailed", http.StatusPreconditionFailed)
			return
		}
		s.objects[r.URL.Path], _ = io.ReadAll(r.Body)
		if s.loseNext {
			s.loseNext = false
			http.Error(w, "lost", http.StatusInternalServerError)
		}
	case http.MethodGet, http.MethodHead:
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"e"`)
		_, _ = w.Write(held)
	}
}

func TestPutNewCreatesOnceAndRecognisesItsOwnRetriedPut(t *testing.T) {
	store := &conditionalStore{objects: map[string][]byte{}}
	srv := httptest.NewServer(store)
	defer srv.Close()
	c := testClient(t, Options{EndpointURL: srv.URL, Anonymous: true})
	if err := c.PutNew("s3://bkt/ds/.claim", []byte("writer 1")); err != nil {
		t.Fatal(err)
	}
	err := c.PutNew("s3://bkt/ds/.claim", []byte("writer 2"))
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a second claim: got %v, want EEXIST", err)
	}
	if got := string(store.objects["/bkt/ds/.claim"]); got != "writer 1" {
		t.Fatalf("the first claim was replaced by %q", got)
	}
	store.loseNext = true // stored, answered 500: the retry meets its own object
	if err := c.PutNew("s3://bkt/other/.claim", []byte("writer 3")); err != nil {
		t.Fatalf("a retried PUT that had succeeded: %v", err)
	}
	if err := c.PutNew("https://host/x", []byte("x")); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("PUT over plain HTTPS: got %v", err)
	}
}
