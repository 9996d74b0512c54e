package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Prefix reads the first n bytes of the object (all of it when shorter) with one request,
// and the object's size and ETag as that answer gives them: what a HEAD and a read of the
// start would give, in one round trip. An empty object, which has no byte to range over,
// costs a HEAD more.
func (o *Object) Prefix(n int64) (data []byte, size int64, etag string, err error) {
	attempt := 0
	err = o.c.do(context.Background(), "GET", o.loc, func(ctx context.Context) (*http.Request, error) {
		o.observe(&attempt)
		req, err := o.c.request(ctx, http.MethodGet, o.loc, o.loc.url, nil, emptyHash)
		if err == nil {
			req.Header.Set("Range", fmt.Sprintf("bytes=0-%d", n-1))
			o.pin(req)
		}
		return req, err
	}, func(resp *http.Response) error {
		if err := o.checkETag(resp); err != nil {
			return err
		}
		etag = trimETag(resp.Header.Get("ETag"))
		switch resp.StatusCode {
		case http.StatusPartialContent:
			var total string
			if _, err := fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes 0-%d/%s", new(int64), &total); err != nil {
				return fmt.Errorf("malformed Content-Range %q", resp.Header.Get("Content-Range"))
			}
			if size, err = strconv.ParseInt(strings.TrimSpace(total), 10, 64); err != nil {
				return fmt.Errorf("no size in Content-Range %q", resp.Header.Get("Content-Range"))
			}
		case http.StatusOK: // a server that ignores Range sends the whole object
			if size = resp.ContentLength; size < 0 {
				return fmt.Errorf("no Content-Length in the answer")
			}
		default:
			return fmt.Errorf("unexpected HTTP %d to a range request", resp.StatusCode)
		}
		data = make([]byte, min(n, size))
		if _, err := io.ReadFull(resp.Body, data); err != nil {
			return fmt.Errorf("%w: %v", ErrShortBody, err)
		}
		return nil
	})
	var se *statusError
	if errors.As(err, &se) && se.code == http.StatusRequestedRangeNotSatisfiable {
		size, etag, err = o.Stat()
		if err == nil && size != 0 {
			err = fmt.Errorf("GET %s: a range from byte 0 refused for an object of %d bytes", o.loc.raw, size)
		}
		return nil, size, etag, err
	}
	return data, size, etag, err
}
