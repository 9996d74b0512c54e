package remote

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/ffrecord/ffrecord/core/internal/parallel"
)

// maxRequestBytes bounds one range request: adjacent spans are merged up to it, and a
// larger span is split into requests of it, so that a big header or sample is fetched
// over several connections at once.
const maxRequestBytes = 8 << 20

// Span is len(Buf) bytes of an object from offset Off.
type Span struct {
	Off int64
	Buf []byte
}

// SpanError is the failure to read span Index of a ReadRanges call; the bytes
// [Off, End) are those of the request that failed.
type SpanError struct {
	Index    int
	Off, End int64
	Err      error
}

func (e *SpanError) Error() string {
	return fmt.Sprintf("bytes [%d, %d): %v", e.Off, e.End, e.Err)
}

func (e *SpanError) Unwrap() error { return e.Err }

// Object is one remote object.
type Object struct {
	c        *Client
	loc      *location
	observer Observer
	// etag is the ETag Stat saw: every later read asks for that version of the object
	// (If-Match) and checks the answer's ETag, so that an object replaced after it was
	// opened is never read as the old one. Empty: the store sent none; nothing is checked.
	etag string
}

// Observer counts an object's requests (each attempt, and whether it retries a failed
// one) and the body bytes they received.
type Observer interface {
	Request(retry bool)
	Received(bytes int64)
}

// SetObserver has every later request of o counted by obs. Call it before any request.
func (o *Object) SetObserver(obs Observer) { o.observer = obs }

// observe counts one attempt of a request.
func (o *Object) observe(attempt *int) {
	if o.observer != nil {
		o.observer.Request(*attempt > 0)
	}
	*attempt++
}

// Object returns the object a URL names (no request is made).
func (c *Client) Object(raw string) (*Object, error) {
	loc, err := c.locate(raw)
	if err != nil {
		return nil, err
	}
	return &Object{c: c, loc: loc}, nil
}

// Stat returns the object's size and ETag, and pins that ETag for the reads that follow.
// It must not run concurrently with ReadRanges.
func (o *Object) Stat() (int64, string, error) {
	size, etag, err := o.c.Stat(o.loc.raw)
	if o.observer != nil {
		o.observer.Request(false)
	}
	if err == nil {
		o.etag = etag
	}
	return size, etag, err
}

// Pin makes every later read ask for the version of the object with this ETag, as Stat
// would have found it (a version another reader found). Call it before any request.
func (o *Object) Pin(etag string) { o.etag = etag }

// ReadSpan fills one span with exactly one range request, however large (a cache's
// chunk: one GET each).
func (o *Object) ReadSpan(s Span) error {
	if len(s.Buf) == 0 {
		return nil
	}
	return o.read(&request{off: s.Off, end: s.Off + int64(len(s.Buf)),
		pieces: []piece{{span: 0, off: s.Off, buf: s.Buf}}})
}

// pin makes req conditional on the ETag seen at open. A weak ETag (W/"…") cannot be: If-Match
// compares strongly and would always fail; the answer's ETag is still compared.
func (o *Object) pin(req *http.Request) {
	if o.etag != "" && !strings.HasPrefix(o.etag, "W/") {
		req.Header.Set("If-Match", `"`+o.etag+`"`)
	}
}

// checkETag refuses an answer from another version of the object than the one opened.
func (o *Object) checkETag(resp *http.Response) error {
	if now := trimETag(resp.Header.Get("ETag")); o.etag != "" && now != "" && now != o.etag {
		return &changedError{opened: o.etag, now: now}
	}
	return nil
}

// piece is a part of a span, as one request reads it.
type piece struct {
	span int // index in the caller's spans
	off  int64
	buf  []byte
}

// request is one range request: pieces back to back from off.
type request struct {
	off, end int64
	pieces   []piece
}

// ReadRanges fills every span's buffer, with as many range requests in flight as the
// client allows. Spans that follow one another in the object are read by one request.
// The error is a *SpanError naming the first span of the failed request.
func (o *Object) ReadRanges(spans []Span) error {
	reqs := plan(spans, o.c.opts.Concurrency, o.c.opts.coalesceGap(), o.c.opts.mergeGap())
	if len(reqs) == 0 {
		return nil
	}
	if len(reqs) == 1 {
		return o.read(&reqs[0])
	}
	return parallel.Each(len(reqs), parallel.UpTo(o.c.opts.Concurrency-1), func() {},
		func(i int) error { return o.read(&reqs[i]) })
}

// readThroughShare bounds the bytes read through gaps to fit a batch in one round of the
// pool: at most 1/readThroughShare of the bytes the batch wants. Object storage bills every
// byte it sends, so a loader's epoch without a cache downloads at most ~6% more than it
// reads, whatever its batches' size (a worker's task of several batches included); a
// round trip saved is worth the bytes only within that bound.
const readThroughShare = 16

// plan cuts spans into pieces of at most maxRequestBytes and groups the pieces that are
// adjacent in the object into requests, reading through gaps of up to mergeGap bytes
// always (as many bytes as a request costs; no gap at all when maxGap is not positive).
// When that leaves more requests than depth (more than one round trip of the pool), the
// smallest gaps of at most maxGap bytes between requests are read through, until the
// batch fits in depth requests or the bytes read through would pass readThroughShare of
// the bytes wanted.
func plan(spans []Span, depth int, maxGap, mergeGap int64) []request {
	var pieces []piece
	var wanted int64
	for k, s := range spans {
		wanted += int64(len(s.Buf))
		for at := 0; at < len(s.Buf); at += maxRequestBytes {
			end := min(len(s.Buf), at+maxRequestBytes)
			pieces = append(pieces, piece{span: k, off: s.Off + int64(at), buf: s.Buf[at:end]})
		}
	}
	slices.SortStableFunc(pieces, func(a, b piece) int { return cmp.Compare(a.off, b.off) })
	var reqs []request
	for _, p := range pieces {
		end := p.off + int64(len(p.buf))
		if n := len(reqs); n > 0 && reqs[n-1].end == p.off && end-reqs[n-1].off <= maxRequestBytes {
			reqs[n-1].end = end
			reqs[n-1].pieces = append(reqs[n-1].pieces, p)
			continue
		}
		reqs = append(reqs, request{off: p.off, end: end, pieces: []piece{p}})
	}
	if maxGap <= 0 {
		return reqs
	}
	if mergeGap > 0 && len(reqs) > 1 {
		reqs = bridge(reqs, len(reqs), min(mergeGap, maxGap), -1)
	}
	if len(reqs) <= depth {
		return reqs
	}
	return bridge(reqs, len(reqs)-depth, maxGap, wanted/readThroughShare)
}

// bridge merges up to count pairs of neighbouring requests across their gaps, smallest
// gaps first, none wider than maxGap, no merged request over maxRequestBytes, and (budget
// not negative) the gaps' bytes adding up to at most budget.
func bridge(reqs []request, count int, maxGap, budget int64) []request {
	gaps := make([]int, 0, len(reqs)-1)
	for i := range len(reqs) - 1 {
		if g := reqs[i+1].off - reqs[i].end; g > 0 && g <= maxGap {
			gaps = append(gaps, i)
		}
	}
	gap := func(i int) int64 { return reqs[i+1].off - reqs[i].end }
	slices.SortFunc(gaps, func(a, b int) int { return cmp.Compare(gap(a), gap(b)) })
	join := make([]bool, len(reqs))
	for _, i := range gaps[:min(count, len(gaps))] {
		if budget >= 0 {
			if budget < gap(i) {
				break
			}
			budget -= gap(i)
		}
		join[i] = true
	}
	merged := reqs[:1]
	for i := 1; i < len(reqs); i++ {
		last := &merged[len(merged)-1]
		if join[i-1] && reqs[i].end-last.off <= maxRequestBytes {
			last.end = reqs[i].end
			last.pieces = append(last.pieces, reqs[i].pieces...)
			continue
		}
		merged = append(merged, reqs[i])
	}
	return merged
}

// read performs one range request, reading the body straight into the pieces' buffers.
func (o *Object) read(r *request) error {
	rangeHeader := fmt.Sprintf("bytes=%d-%d", r.off, r.end-1)
	attempt := 0
	err := o.c.do(context.Background(), "GET", o.loc, func(ctx context.Context) (*http.Request, error) {
		o.observe(&attempt)
		req, err := o.c.request(ctx, http.MethodGet, o.loc, o.loc.url, nil, emptyHash)
		if err == nil {
			req.Header.Set("Range", rangeHeader)
			o.pin(req)
		}
		return req, err
	}, func(resp *http.Response) error {
		if err := o.checkETag(resp); err != nil {
			return err
		}
		counted := &countingReader{r: resp.Body}
		defer func() {
			if o.observer != nil {
				o.observer.Received(counted.n)
			}
		}()
		body := io.Reader(counted)
		switch {
		case resp.StatusCode == http.StatusPartialContent:
			if err := checkContentRange(resp.Header.Get("Content-Range"), r.off); err != nil {
				return err
			}
		case resp.StatusCode == http.StatusOK && resp.ContentLength >= 0:
			// A server that ignores Range sends the whole object: skip to the range.
			if _, err := io.CopyN(io.Discard, body, r.off); err != nil {
				return fmt.Errorf("%w: %v", ErrShortBody, err)
			}
		default:
			return fmt.Errorf("unexpected HTTP %d to a range request", resp.StatusCode)
		}
		at := r.off
		for _, p := range r.pieces {
			if p.off > at { // a gap read through: its bytes are not wanted
				if err := skip(body, p.off-at); err != nil {
					return fmt.Errorf("%w: %v", ErrShortBody, err)
				}
			}
			at = p.off + int64(len(p.buf))
			if _, err := io.ReadFull(body, p.buf); err != nil {
				if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
					return fmt.Errorf("%w: %v", ErrShortBody, err)
				}
				return err
			}
		}
		return nil
	})
	var se *statusError
	if errors.As(err, &se) && se.code == http.StatusPreconditionFailed {
		err = opError("GET", o.loc.raw, &changedError{opened: o.etag})
	}
	if err != nil {
		return &SpanError{Index: r.pieces[0].span, Off: r.off, End: r.end, Err: err}
	}
	return nil
}

// checkContentRange refuses a partial answer that does not start where the request did
// (a proxy or server that answered another range would put wrong bytes in the batch).
func checkContentRange(header string, off int64) error {
	var start, end int64
	if header == "" {
		return nil // not sent by every server; the length is still checked as it is read
	}
	if _, err := fmt.Sscanf(header, "bytes %d-%d/", &start, &end); err != nil {
		return fmt.Errorf("malformed Content-Range %q", header)
	}
	if start != off {
		return fmt.Errorf("%w: asked for bytes from %d, got Content-Range %q", ErrShortBody, off, header)
	}
	return nil
}

// ReadAll returns the whole object, refusing one larger than limit bytes, with one GET:
// a small document (a dataset's spec) read as a job starts costs one round trip, not a
// HEAD for its size and then a GET.
func (o *Object) ReadAll(limit int64) ([]byte, error) {
	var data []byte
	refused := int64(-1) // the size of an object too large (not an error to retry)
	attempt := 0
	err := o.c.do(context.Background(), "GET", o.loc, func(ctx context.Context) (*http.Request, error) {
		o.observe(&attempt)
		req, err := o.c.request(ctx, http.MethodGet, o.loc, o.loc.url, nil, emptyHash)
		if err == nil {
			o.pin(req)
		}
		return req, err
	}, func(resp *http.Response) error {
		if err := o.checkETag(resp); err != nil {
			return err
		}
		if resp.ContentLength > limit {
			refused = resp.ContentLength
			return nil
		}
		counted := &countingReader{r: resp.Body}
		body, err := io.ReadAll(io.LimitReader(counted, limit+1))
		if o.observer != nil {
			o.observer.Received(counted.n)
		}
		switch {
		case err != nil:
			return fmt.Errorf("%w: %v", ErrShortBody, err)
		case int64(len(body)) > limit:
			refused = int64(len(body))
		case resp.ContentLength >= 0 && int64(len(body)) != resp.ContentLength:
			return fmt.Errorf("%w: %d of %d bytes", ErrShortBody, len(body), resp.ContentLength)
		}
		data = body
		return nil
	})
	if err == nil && refused >= 0 {
		return nil, fmt.Errorf("%w: %s is more than the %d bytes read whole (%d or more)", ErrUnsupported, o.loc.raw, limit, refused)
	}
	return data, err
}

// skipBuffers hold the bytes of bridged gaps on their way to nowhere: large, so that a
// megabyte of gap costs a few reads rather than hundreds (io.Discard reads 8 KiB at a time).
var skipBuffers = sync.Pool{New: func() any { return new([256 << 10]byte) }}

// skip reads and drops n bytes of r.
func skip(r io.Reader, n int64) error {
	buf := skipBuffers.Get().(*[256 << 10]byte)
	defer skipBuffers.Put(buf)
	for n > 0 {
		k, err := io.ReadFull(r, buf[:min(n, int64(len(buf)))])
		n -= int64(k)
		if err != nil {
			return err
		}
	}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}
