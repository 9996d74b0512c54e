package remote

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"time"
)

// Backoff between attempts: exponential from backoffBase, capped, with jitter so that
// the many requests of a batch that failed together do not come back together.
const (
	backoffBase = 50 * time.Millisecond
	backoffCap  = 2 * time.Second
	errorBody   = 512 // bytes of a failure's body kept for its message
)

// do sends the request build makes (once per attempt, each under its own deadline) and
// gives a successful answer to handle. Transport failures, retryable statuses and errors
// of handle are tried again up to the retry budget; a body cut short (ErrShortBody) is
// tried again once. The error names op and the object.
func (c *Client) do(ctx context.Context, op string, loc *location,
	build func(context.Context) (*http.Request, error), handle func(*http.Response) error) error {
	attempts := c.opts.retries() + 1
	shortSeen := false
	var err error
	for attempt := range attempts {
		if attempt > 0 {
			time.Sleep(backoff(attempt))
		}
		var again bool
		if err, again = c.attempt(ctx, build, handle); err == nil {
			return nil
		}
		if errors.Is(err, ErrShortBody) {
			if shortSeen {
				break
			}
			shortSeen = true
			continue
		}
		if !again {
			break
		}
	}
	return opError(op, loc.raw, err)
}

// attempt makes one request in a slot of the client's pool.
func (c *Client) attempt(ctx context.Context, build func(context.Context) (*http.Request, error),
	handle func(*http.Response) error) (err error, again bool) {
	c.slots <- struct{}{}
	defer func() { <-c.slots }()
	ctx, cancel := context.WithTimeout(ctx, c.opts.timeout())
	defer cancel()
	req, err := build(ctx)
	if err != nil {
		return err, false
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err, true // refused, reset, timed out: the network's failures
	}
	defer func() {
		// Drained, the connection goes back to the pool for the next request.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode >= 300 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBody))
		return &statusError{code: resp.StatusCode, body: string(body)}, retryable(resp.StatusCode)
	}
	if err := handle(resp); err != nil {
		return err, !errors.Is(err, ErrChanged) // a replaced object stays replaced
	}
	return nil, false
}

func backoff(attempt int) time.Duration {
	d := min(backoffCap, backoffBase<<(attempt-1))
	return d/2 + rand.N(d/2+1)
}
