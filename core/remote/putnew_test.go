package remote

import (
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// conditionalStore answers PUT with If-None-Match: * as S3 does (412 when the key is
// taken), GET and HEAD with what it holds and its ETag (a digest of it), and DELETE with
// If-Match as S3 does (412 for another ETag); loseNext makes it store a PUT (or do a
// DELETE) but answer 500, as a response lost on the way back would look to the client;
// beforeDelete runs as a DELETE arrives (another writer acting in between).
type conditionalStore struct {
	mu           sync.Mutex
	objects      map[string][]byte
	loseNext     bool
	beforeDelete func()
	deletes      []string // the If-Match of each DELETE
}

func etagOf(data []byte) string { return fmt.Sprintf("%x", md5.Sum(data)) }

// refused answers 404 for a missing object and 412 for one another than If-Match asks for.
func refused(w http.ResponseWriter, r *http.Request, held []byte, ok bool) bool {
	switch match := r.Header.Get("If-Match"); {
	case !ok:
		http.NotFound(w, r)
	case match != "" && match != `"`+etagOf(held)+`"`:
		http.Error(w, "PreconditionFailed", http.StatusPreconditionFailed)
	default:
		return false
	}
	return true
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
		if refused(w, r, held, ok) {
			return
		}
		w.Header().Set("ETag", `"`+etagOf(held)+`"`)
		w.Header().Set("Content-Length", fmt.Sprint(len(held)))
		if r.Method == http.MethodGet {
			_, _ = w.Write(held)
		}
	case http.MethodDelete:
		s.deletes = append(s.deletes, r.Header.Get("If-Match"))
		if s.beforeDelete != nil {
			s.beforeDelete()
			s.beforeDelete = nil
			held, ok = s.objects[r.URL.Path]
		}
		if refused(w, r, held, ok) {
			return
		}
		delete(s.objects, r.URL.Path)
		if s.loseNext {
			s.loseNext = false
			http.Error(w, "lost", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
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

func TestDeleteIfHoldsDeletesOnlyWhatItWrote(t *testing.T) {
	store := &conditionalStore{objects: map[string][]byte{}}
	srv := httptest.NewServer(store)
	defer srv.Close()
	c := testClient(t, Options{EndpointURL: srv.URL, Anonymous: true})
	const url = "s3://bkt/ds/.claim"
	mine, theirs := []byte("writer 1 token a"), []byte("writer 2 token b")
	put := func(body []byte) {
		store.mu.Lock()
		store.objects["/bkt/ds/.claim"] = body
		store.mu.Unlock()
	}
	held := func() string {
		store.mu.Lock()
		defer store.mu.Unlock()
		return string(store.objects["/bkt/ds/.claim"])
	}

	put(mine)
	if err := c.DeleteIfHolds(url, mine); err != nil || held() != "" {
		t.Fatalf("its own object: %v, left %q", err, held())
	}
	if got := store.deletes[len(store.deletes)-1]; got != `"`+etagOf(mine)+`"` {
		t.Errorf("DELETE If-Match %q, want the ETag read", got)
	}
	if err := c.DeleteIfHolds(url, mine); err != nil {
		t.Fatalf("a missing object: %v", err)
	}
	for name, body := range map[string][]byte{"same length": theirs, "longer": append(theirs, 'x')} {
		put(body)
		if err := c.DeleteIfHolds(url, mine); !errors.Is(err, fs.ErrExist) || held() != string(body) {
			t.Errorf("another writer's object (%s): %v, left %q", name, err, held())
		}
	}
	put(mine) // replaced by another writer's between the read and the delete: If-Match saves it
	store.beforeDelete = func() { store.objects["/bkt/ds/.claim"] = theirs }
	if err := c.DeleteIfHolds(url, mine); !errors.Is(err, fs.ErrExist) || held() != string(theirs) {
		t.Errorf("replaced before the delete: %v, left %q", err, held())
	}
	put(mine) // deleted, the answer lost: the retry finds nothing, which is success
	store.loseNext = true
	if err := c.DeleteIfHolds(url, mine); err != nil || held() != "" {
		t.Errorf("a retried delete: %v, left %q", err, held())
	}
	if err := c.DeleteIfHolds("https://host/x", mine); !errors.Is(err, ErrUnsupported) {
		t.Errorf("over plain HTTPS: %v", err)
	}
}
