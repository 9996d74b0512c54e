package remote

import (
	"errors"
	"net/http"
	"syscall"
	"testing"
)

// An object replaced after Stat: reads ask for the version opened (If-Match), and an
// answer from another version, whether the store refuses (412) or ignores the condition
// and sends the new ETag, is ErrChanged at once, never retried, never the new bytes.
func TestReplacedObjectIsErrChanged(t *testing.T) {
	data := pattern(4096)
	srv := newFakeServer(t, data)
	o, _ := testClient(t, Options{Retries: 3}).Object(srv.URL + "/obj")
	if _, etag, err := o.Stat(); err != nil || etag != "v1" {
		t.Fatalf("Stat: ETag %q, %v", etag, err)
	}
	if err := readSpans(t, o, data, []int{0}, []int{10}); err != nil {
		t.Fatal(err)
	}
	if got := srv.seen[len(srv.seen)-1].Header.Get("If-Match"); got != `"v1"` {
		t.Fatalf("If-Match %q, want the ETag seen at open", got)
	}
	replaced := func(w http.ResponseWriter, _ *http.Request) bool {
		w.Header().Set("ETag", `"v2"`)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(data)
		return true
	}
	for name, answer := range map[string]func(http.ResponseWriter, *http.Request) bool{
		"412": status(http.StatusPreconditionFailed), "another ETag": replaced,
	} {
		before := srv.requests.Load()
		srv.then(answer, answer, answer)
		err := readSpans(t, o, data, []int{100}, []int{10})
		if !errors.Is(err, ErrChanged) || !errors.Is(err, syscall.ESTALE) {
			t.Fatalf("%s: %v, want ErrChanged (ESTALE)", name, err)
		}
		if n := srv.requests.Load() - before; n != 1 {
			t.Fatalf("%s: %d requests, want 1 (a replaced object is not retried)", name, n)
		}
		srv.failures = nil
	}
}
