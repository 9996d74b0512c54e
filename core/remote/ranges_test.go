package remote

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPlanCoalescesAdjacentSpansAndSplitsLargeOnes(t *testing.T) {
	buf := make([]byte, maxRequestBytes+10)
	spans := []Span{
		{Off: 100, Buf: buf[:10]},
		{Off: 0, Buf: buf[10:110]}, // ends where the first begins
		{Off: 500, Buf: buf[110:120]},
		{Off: 1000, Buf: buf[:maxRequestBytes+10]},
	}
	reqs := plan(spans, 64, DefaultCoalesceGap, 0)
	got := make([][2]int64, len(reqs))
	for i, r := range reqs {
		got[i] = [2]int64{r.off, r.end}
	}
	want := [][2]int64{{0, 110}, {500, 510}, {1000, 1000 + maxRequestBytes}, {1000 + maxRequestBytes, 1010 + maxRequestBytes}}
	if len(got) != len(want) {
		t.Fatalf("requests %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("requests %v, want %v", got, want)
		}
	}
	if reqs[0].pieces[0].span != 1 || reqs[0].pieces[1].span != 0 {
		t.Fatalf("the merged request reads span 1 then span 0, got %+v", reqs[0].pieces)
	}
}

func readSpans(t *testing.T, o *Object, data []byte, offs, lens []int) error {
	t.Helper()
	spans := make([]Span, len(offs))
	for i := range offs {
		spans[i] = Span{Off: int64(offs[i]), Buf: make([]byte, lens[i])}
	}
	if err := o.ReadRanges(spans); err != nil {
		return err
	}
	for i, s := range spans {
		if !bytes.Equal(s.Buf, data[offs[i]:offs[i]+lens[i]]) {
			t.Fatalf("span %d (%d bytes at %d) differs from the object", i, lens[i], offs[i])
		}
	}
	return nil
}

func TestReadRangesIsByteExactWithOneRequestPerRun(t *testing.T) {
	data := pattern(1 << 16)
	srv := newFakeServer(t, data)
	o, err := testClient(t, Options{Concurrency: 4, MergeGap: -1}).Object(srv.URL + "/obj")
	if err != nil {
		t.Fatal(err)
	}
	// Three runs of adjacent spans: 0-300, 1000-1100, 5000-5001.
	offs := []int{0, 100, 200, 1000, 5000, 1050}
	lens := []int{100, 100, 100, 50, 1, 50}
	if err := readSpans(t, o, data, offs, lens); err != nil {
		t.Fatal(err)
	}
	if n := srv.requests.Load(); n != 3 {
		t.Fatalf("%d requests, want 3 (adjacent spans coalesced)", n)
	}
}

func TestTransientFailuresAreRetried(t *testing.T) {
	data := pattern(4096)
	for name, failure := range map[string]func(http.ResponseWriter, *http.Request) bool{
		"503": status(503), "500": status(500), "429": status(429), "reset": reset,
		"truncated": truncated(data),
	} {
		t.Run(name, func(t *testing.T) {
			srv := newFakeServer(t, data)
			srv.then(failure, failure)
			if name == "truncated" {
				srv.failures = srv.failures[:1] // a cut body is retried once only
			}
			o, _ := testClient(t, Options{Retries: 3}).Object(srv.URL + "/obj")
			if err := readSpans(t, o, data, []int{10}, []int{1000}); err != nil {
				t.Fatalf("after transient failures: %v", err)
			}
		})
	}
}

func TestPermanentFailuresAreTyped(t *testing.T) {
	data := pattern(4096)
	srv := newFakeServer(t, data)
	o, _ := testClient(t, Options{Retries: 3}).Object(srv.URL + "/obj")

	srv.then(status(403))
	err := readSpans(t, o, data, []int{0}, []int{10})
	if !errors.Is(err, fs.ErrPermission) || srv.requests.Load() != 1 {
		t.Fatalf("403: %v after %d requests, want a permission error at once", err, srv.requests.Load())
	}
	srv.then(status(404))
	if _, _, err := o.Stat(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("404: %v, want not found", err)
	}
	srv.always = truncated(data)
	err = readSpans(t, o, data, []int{100}, []int{1000})
	var se *SpanError
	if !errors.Is(err, ErrShortBody) || !errors.As(err, &se) || se.Off != 100 || se.End != 1100 {
		t.Fatalf("body always cut short: %v, want ErrShortBody naming bytes [100, 1100)", err)
	}
	srv.always = status(503)
	if err := readSpans(t, o, data, []int{0}, []int{10}); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("503 forever: %v, want the last answer once the budget is spent", err)
	}
}

func TestEveryRequestHasADeadline(t *testing.T) {
	data := pattern(4096)
	srv := newFakeServer(t, data)
	srv.always = stall(3 * time.Second)
	o, _ := testClient(t, Options{Timeout: 0.2, Retries: -1}).Object(srv.URL + "/obj")
	done := make(chan error, 1)
	go func() { done <- readSpans(t, o, data, []int{0}, []int{10}) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a stalled server answered nothing, yet the read succeeded")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a read from a stalled server did not give up at its deadline")
	}
}

func TestS3RequestsAreSignedAndAddressed(t *testing.T) {
	data := pattern(100)
	srv := newFakeServer(t, data)
	c := testClient(t, Options{EndpointURL: srv.URL, Region: "eu-west-3", Env: map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret"}})
	o, err := c.Object("s3://bucket/dir/a b.ffr")
	if err != nil {
		t.Fatal(err)
	}
	if err := readSpans(t, o, data, []int{5}, []int{10}); err != nil {
		t.Fatal(err)
	}
	r := srv.seen[0]
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") || !strings.Contains(auth, "/eu-west-3/s3/aws4_request") {
		t.Fatalf("Authorization %q is not a SigV4 signature for eu-west-3", auth)
	}
	if r.URL.EscapedPath() != "/bucket/dir/a%20b.ffr" {
		t.Fatalf("path-style address %q, want /bucket/dir/a%%20b.ffr", r.URL.EscapedPath())
	}
	anon := testClient(t, Options{EndpointURL: srv.URL, Anonymous: true})
	o, _ = anon.Object("s3://bucket/k")
	if err := readSpans(t, o, data, []int{0}, []int{1}); err != nil {
		t.Fatal(err)
	}
	if a := srv.seen[1].Header.Get("Authorization"); a != "" {
		t.Fatalf("anonymous request carries Authorization %q", a)
	}
}

// spansAt are spans of size bytes at offs.
func spansAt(size int, offs ...int64) []Span {
	var spans []Span
	for _, off := range offs {
		spans = append(spans, Span{Off: off, Buf: make([]byte, size)})
	}
	return spans
}

func TestPlanBridgesTheSmallestGapsWhenOverDepth(t *testing.T) {
	// 1,000 bytes wanted: 62 may be read through. Gaps 10, 970, 5, 3975.
	spans := spansAt(200, 0, 210, 1380, 1585, 5760)
	if n := len(plan(spans, 8, 1<<20, 0)); n != 5 {
		t.Fatalf("within depth: %d requests, want 5 (no gap read through)", n)
	}
	reqs := plan(spans, 3, 1<<20, 0)
	got := make([][2]int64, len(reqs))
	for i, r := range reqs {
		got[i] = [2]int64{r.off, r.end}
	}
	if want := [][2]int64{{0, 410}, {1380, 1785}, {5760, 5960}}; !slices.Equal(got, want) {
		t.Fatalf("depth 3: requests %v, want %v (the two smallest gaps bridged)", got, want)
	}
	if n := len(plan(spans, 1, 1<<20, 0)); n != 3 {
		t.Fatalf("gaps past the bytes' share are never bridged: %d requests, want 3", n)
	}
	if n := len(plan(spans, 1, 8, 0)); n != 4 {
		t.Fatalf("gaps over maxGap are never bridged: %d requests, want 4", n)
	}
}

func TestBytesReadThroughToFitTheDepthStayWithinTheirShare(t *testing.T) {
	// A loader worker's task of 256 samples of 16 KiB drawn from 5,000: gaps of up to a
	// megabyte would fit it in one round of 64 requests, at 8 times the bytes wanted.
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		size := 1 + rng.IntN(32<<10)
		count := 1 + rng.IntN(300)
		picked := map[int64]bool{}
		var offs []int64
		for len(offs) < count {
			if k := rng.Int64N(int64(count * (1 + rng.IntN(40)))); !picked[k] {
				picked[k] = true
				offs = append(offs, k*int64(size))
			}
		}
		spans := spansAt(size, offs...)
		var fetched int64
		for _, r := range plan(spans, 1+rng.IntN(64), DefaultCoalesceGap, 0) {
			fetched += r.end - r.off
		}
		if wanted := int64(size * count); fetched > wanted+wanted/readThroughShare {
			t.Fatalf("trial %d: %d bytes fetched for %d wanted (%d spans of %d)", trial, fetched, wanted, count, size)
		}
	}
}

func TestBridgedGapsAreSkippedOnTheWire(t *testing.T) {
	data := pattern(1 << 16)
	srv := newFakeServer(t, data)
	o, _ := testClient(t, Options{Concurrency: 2, MergeGap: -1}).Object(srv.URL + "/obj")
	offs := []int{0, 2050, 4150, 6300, 60000} // gaps 50, 100, 150 within 1/16 of 10,000 bytes
	lens := []int{2000, 2000, 2000, 2000, 2000}
	if err := readSpans(t, o, data, offs, lens); err != nil {
		t.Fatal(err)
	}
	if n := srv.requests.Load(); n != 2 {
		t.Fatalf("%d requests, want 2 (gaps bridged down to the concurrency)", n)
	}
}

func TestContentRangeMustStartWhereAsked(t *testing.T) {
	for header, ok := range map[string]bool{
		"": true, "bytes 10-19/100": true, "bytes 10-19/*": true, "bytes 0-9/100": false, "junk": false,
	} {
		if err := checkContentRange(header, 10); (err == nil) != ok {
			t.Errorf("Content-Range %q: %v", header, err)
		}
	}
}

func TestPlanAlwaysMergesGapsUnderTheWasteBound(t *testing.T) {
	// 64 labels of 8 bytes scattered 2.5 KB apart: one request whatever the pool's depth.
	buf := make([]byte, 64*8)
	var spans []Span
	for k := range 64 {
		spans = append(spans, Span{Off: int64(k * 2500), Buf: buf[k*8 : k*8+8]})
	}
	if n := len(plan(spans, 64, DefaultCoalesceGap, DefaultMergeGap)); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
	// Gaps over the bound stay unread while the batch fits the pool.
	if n := len(plan(spans, 64, DefaultCoalesceGap, 2000)); n != 64 {
		t.Fatalf("%d requests, want 64", n)
	}
}

func TestReadAllIsOneGetAndRefusesALargeObjectOnce(t *testing.T) {
	data := pattern(5000)
	srv := newFakeServer(t, data)
	o, _ := testClient(t, Options{Retries: 3}).Object(srv.URL + "/obj")
	got, err := o.ReadAll(5000)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadAll: %d bytes, %v", len(got), err)
	}
	if n := srv.requests.Load(); n != 1 || srv.seen[0].Method != http.MethodGet {
		t.Fatalf("%d requests (first %s), want one GET", n, srv.seen[0].Method)
	}
	srv.requests.Store(0)
	if _, err := o.ReadAll(4999); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "4999") {
		t.Fatalf("an object over the limit: %v, want ErrUnsupported naming the limit", err)
	}
	if n := srv.requests.Load(); n != 1 {
		t.Fatalf("%d requests for an object over the limit, want 1 (not retried)", n)
	}
	srv.then(status(404))
	if _, err := o.ReadAll(5000); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing object: %v, want fs.ErrNotExist", err)
	}
}
