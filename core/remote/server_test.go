package remote

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer serves one object with Range support, and can be told to misbehave on the
// next requests.
type fakeServer struct {
	*httptest.Server
	data     []byte
	requests atomic.Int64

	mu       sync.Mutex
	failures []func(w http.ResponseWriter, r *http.Request) bool // consumed one per request
	always   func(w http.ResponseWriter, r *http.Request) bool
	seen     []*http.Request
}

func newFakeServer(t *testing.T, data []byte) *fakeServer {
	s := &fakeServer{data: data}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	s.mu.Lock()
	s.seen = append(s.seen, r.Clone(r.Context()))
	var fail func(http.ResponseWriter, *http.Request) bool
	if len(s.failures) > 0 {
		fail, s.failures = s.failures[0], s.failures[1:]
	} else {
		fail = s.always
	}
	s.mu.Unlock()
	if fail != nil && fail(w, r) {
		return
	}
	w.Header().Set("ETag", `"v1"`)
	http.ServeContent(w, r, "object", time.Time{}, bytes.NewReader(s.data))
}

// then queues misbehaviours for the next requests (nil: behave).
func (s *fakeServer) then(f ...func(http.ResponseWriter, *http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, f...)
}

func status(code int) func(http.ResponseWriter, *http.Request) bool {
	return func(w http.ResponseWriter, _ *http.Request) bool {
		http.Error(w, http.StatusText(code), code)
		return true
	}
}

// truncated answers a range request with a 206 whose body stops halfway.
func truncated(data []byte) func(http.ResponseWriter, *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		var start, end int
		if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &start, &end); err != nil {
			return false
		}
		w.Header().Set("Content-Length", strconv.Itoa(end-start+1))
		w.WriteHeader(http.StatusPartialContent)
		_, _ = w.Write(data[start : start+(end-start+1)/2])
		if h, ok := w.(http.Hijacker); ok {
			conn, _, _ := h.Hijack()
			_ = conn.Close()
		}
		return true
	}
}

// reset closes the connection without an answer.
func reset(w http.ResponseWriter, _ *http.Request) bool {
	conn, _, _ := w.(http.Hijacker).Hijack()
	_ = conn.Close()
	return true
}

// stall answers nothing for d.
func stall(d time.Duration) func(http.ResponseWriter, *http.Request) bool {
	return func(http.ResponseWriter, *http.Request) bool {
		time.Sleep(d)
		return true
	}
}

func testClient(t *testing.T, opts Options) *Client {
	t.Helper()
	if err := opts.withDefaults(); err != nil {
		t.Fatal(err)
	}
	c, err := newClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.http.CloseIdleConnections)
	return c
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}
