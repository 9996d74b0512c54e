package remote

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Multipart upload: parts of at least minPart bytes (S3's floor, but the last), at most
// maxParts of them, uploadWorkers in flight (each holds its part in memory).
const (
	minPart       = 8 << 20
	maxParts      = 10000
	uploadWorkers = 8
)

// Upload copies the local file to an s3:// URL. A file larger than one part goes up in
// parallel parts; the object appears only when the upload completes, and an upload that
// fails is aborted, so a failure leaves no object behind (nor a half-written one).
func (c *Client) Upload(localPath, raw string) error {
	loc, err := c.objectToWrite(raw)
	if err != nil {
		return err
	}
	f, err := os.Open(localPath)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	size := info.Size()
	part := max(int64(minPart), (size+maxParts-1)/maxParts)
	if size <= part {
		body := make([]byte, size)
		if _, err := io.ReadFull(f, body); err != nil {
			return fmt.Errorf("reading %s: %w", localPath, err)
		}
		return c.do(context.Background(), "PUT", loc, func(ctx context.Context) (*http.Request, error) {
			return c.request(ctx, http.MethodPut, loc, loc.url, body, unsignedPayload)
		}, func(*http.Response) error { return nil })
	}
	id, err := c.createUpload(loc)
	if err != nil {
		return err
	}
	if err := c.uploadParts(loc, id, f, size, part); err != nil {
		return c.abortAfter(loc, id, err)
	}
	return nil
}

// PutNew creates the object at an s3:// URL holding body, only if no object has that key
// (a conditional PUT, If-None-Match: *): one already there is an error wrapping
// fs.ErrExist (EEXIST). A PUT sent again after its answer was lost finds its own object;
// that is success when the object holds body, so body should say who wrote it.
func (c *Client) PutNew(raw string, body []byte) error {
	loc, err := c.objectToWrite(raw)
	if err != nil {
		return err
	}
	err = c.do(context.Background(), "PUT", loc, func(ctx context.Context) (*http.Request, error) {
		req, err := c.request(ctx, http.MethodPut, loc, loc.url, body, unsignedPayload)
		if req != nil {
			req.Header.Set("If-None-Match", "*")
		}
		return req, err
	}, func(*http.Response) error { return nil })
	var se *statusError
	if !errors.As(err, &se) || se.code != http.StatusPreconditionFailed {
		return err
	}
	if obj, oerr := c.Object(raw); oerr == nil {
		if held, rerr := obj.ReadAll(int64(len(body)) + 1); rerr == nil && bytes.Equal(held, body) {
			return nil
		}
	}
	return &fs.PathError{Op: "PUT", Path: raw, Err: alreadyExists{se}}
}

// DeleteIfHolds deletes the object at an s3:// URL only while it holds body, which should
// say who wrote it (a writer's claim, with a random token): it reads the object, then
// deletes it on condition of the ETag read (If-Match), so that an object another writer
// put in its place meanwhile stays. An object holding anything else is left, and is an
// error wrapping fs.ErrExist (EEXIST); a missing one is no error. A store that ignores
// If-Match on DELETE (or sends no ETag) deletes unconditionally: the read then narrows
// the race to the time between the read and the delete.
func (c *Client) DeleteIfHolds(raw string, body []byte) error {
	loc, err := c.objectToWrite(raw)
	if err != nil {
		return err
	}
	obj := &Object{c: c, loc: loc}
	size, etag, err := obj.Stat() // pins the ETag: the read below is of this version
	if err == nil && size == int64(len(body)) {
		var held []byte
		if held, err = obj.ReadAll(size); err == nil && !bytes.Equal(held, body) {
			err = ErrChanged // another writer's, of the same length
		}
	} else if err == nil {
		err = ErrChanged
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, ErrChanged):
		return &fs.PathError{Op: "DELETE", Path: raw, Err: heldByAnother{}}
	case err != nil:
		return err
	}
	err = c.do(context.Background(), "DELETE", loc, func(ctx context.Context) (*http.Request, error) {
		req, err := c.request(ctx, http.MethodDelete, loc, loc.url, nil, emptyHash)
		if req != nil && etag != "" && !strings.HasPrefix(etag, "W/") {
			req.Header.Set("If-Match", `"`+etag+`"`)
		}
		return req, err
	}, func(*http.Response) error { return nil })
	var se *statusError
	switch {
	case errors.Is(err, fs.ErrNotExist): // deleted by an attempt whose answer was lost, or by hand
		return nil
	case errors.As(err, &se) && se.code == http.StatusPreconditionFailed:
		return &fs.PathError{Op: "DELETE", Path: raw, Err: heldByAnother{}}
	}
	return err
}

// objectToWrite locates an s3:// URL that names an object key.
func (c *Client) objectToWrite(raw string) (*location, error) {
	loc, err := c.locate(raw)
	if err != nil {
		return nil, err
	}
	if !loc.s3 {
		return nil, fmt.Errorf("%w: writing %s: only s3:// URLs can be written", ErrUnsupported, raw)
	}
	if loc.key == "" || strings.HasSuffix(loc.key, "/") {
		return nil, fmt.Errorf("%w: %s names no object key", ErrBadURL, raw)
	}
	return loc, nil
}

// abortAfter aborts upload id after err; the error says so when the abort fails too.
func (c *Client) abortAfter(loc *location, id string, err error) error {
	q := url.Values{"uploadId": {id}}
	target := c.objectURL(loc.bucket, loc.key, q)
	abortErr := c.do(context.Background(), "ABORT", loc, func(ctx context.Context) (*http.Request, error) {
		return c.request(ctx, http.MethodDelete, loc, target, nil, emptyHash)
	}, func(*http.Response) error { return nil })
	if abortErr != nil {
		return fmt.Errorf("%w (and aborting the upload failed: %v)", err, abortErr)
	}
	return err
}

func (c *Client) createUpload(loc *location) (string, error) {
	target := c.objectURL(loc.bucket, loc.key, url.Values{"uploads": {""}})
	var result struct {
		UploadID string `xml:"UploadId"`
	}
	err := c.do(context.Background(), "CREATE-UPLOAD", loc, func(ctx context.Context) (*http.Request, error) {
		return c.request(ctx, http.MethodPost, loc, target, nil, emptyHash)
	}, func(resp *http.Response) error { return decodeXML(resp, &result) })
	if err == nil && result.UploadID == "" {
		err = fmt.Errorf("CREATE-UPLOAD %s: no upload id in the answer", loc.raw)
	}
	return result.UploadID, err
}

type completedPart struct {
	Number int    `xml:"PartNumber"`
	ETag   string `xml:"ETag"`
}

func (c *Client) uploadParts(loc *location, id string, f *os.File, size, part int64) error {
	n := int((size + part - 1) / part)
	parts := make([]completedPart, n)
	var (
		mu    sync.Mutex
		first error
		next  int
		wg    sync.WaitGroup
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if first != nil || next == n {
			return 0, false
		}
		next++
		return next - 1, true
	}
	for range min(n, uploadWorkers) {
		wg.Go(func() {
			buf := make([]byte, part)
			for {
				k, ok := take()
				if !ok {
					return
				}
				err := c.uploadPart(loc, id, f, k, part, size, buf, &parts[k])
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	err := c.completeUpload(loc, id, parts)
	if err != nil && c.completedDespite(loc, size, parts) {
		return nil
	}
	return err
}

// completedDespite tells whether a completion that failed (its answer lost, say, and the
// retry told the upload no longer exists) did complete: the object is there with the
// uploaded size and the ETag of these parts. S3's multipart ETag is the MD5 of the parts'
// MD5s followed by "-<parts>"; where the parts' ETags are not MD5s (encrypted buckets,
// other stores) only the "-<parts>" suffix can be checked.
func (c *Client) completedDespite(loc *location, size int64, parts []completedPart) bool {
	got, etag, err := c.Stat(loc.raw)
	if err != nil || got != size {
		return false
	}
	suffix := "-" + strconv.Itoa(len(parts))
	if want, ok := multipartETag(parts); ok {
		return etag == want+suffix
	}
	return strings.HasSuffix(etag, suffix)
}

// multipartETag is the MD5 of the parts' MD5s, in hex; false when a part's ETag is no MD5.
func multipartETag(parts []completedPart) (string, bool) {
	h := md5.New()
	for _, p := range parts {
		sum, err := hex.DecodeString(strings.Trim(p.ETag, `"`))
		if err != nil || len(sum) != md5.Size {
			return "", false
		}
		h.Write(sum)
	}
	return hex.EncodeToString(h.Sum(nil)), true
}

func (c *Client) uploadPart(loc *location, id string, f *os.File, k int, part, size int64, buf []byte, done *completedPart) error {
	off := int64(k) * part
	body := buf[:min(part, size-off)]
	if _, err := f.ReadAt(body, off); err != nil {
		return fmt.Errorf("reading %s at %d: %w", f.Name(), off, err)
	}
	q := url.Values{"partNumber": {strconv.Itoa(k + 1)}, "uploadId": {id}}
	target := c.objectURL(loc.bucket, loc.key, q)
	*done = completedPart{Number: k + 1}
	return c.do(context.Background(), "UPLOAD-PART", loc, func(ctx context.Context) (*http.Request, error) {
		return c.request(ctx, http.MethodPut, loc, target, body, unsignedPayload)
	}, func(resp *http.Response) error {
		done.ETag = resp.Header.Get("ETag")
		if done.ETag == "" {
			return fmt.Errorf("part %d: no ETag in the answer", k+1)
		}
		return nil
	})
}

func (c *Client) completeUpload(loc *location, id string, parts []completedPart) error {
	body, err := xml.Marshal(struct {
		XMLName xml.Name        `xml:"CompleteMultipartUpload"`
		Parts   []completedPart `xml:"Part"`
	}{Parts: parts})
	if err != nil {
		return err
	}
	target := c.objectURL(loc.bucket, loc.key, url.Values{"uploadId": {id}})
	return c.do(context.Background(), "COMPLETE-UPLOAD", loc, func(ctx context.Context) (*http.Request, error) {
		return c.request(ctx, http.MethodPost, loc, target, body, unsignedPayload)
	}, func(resp *http.Response) error {
		// S3 may answer 200 and report a failure in the body.
		answer, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if bytes.Contains(answer, []byte("<Error>")) {
			return fmt.Errorf("completing the upload: %s", answer)
		}
		return nil
	})
}

func decodeXML(resp *http.Response, v any) error {
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return xml.Unmarshal(body, v)
}

// Delete removes the object at an s3:// URL; a missing object is not an error.
func (c *Client) Delete(raw string) error {
	loc, err := c.locate(raw)
	if err != nil {
		return err
	}
	if !loc.s3 {
		return fmt.Errorf("%w: deleting %s: only s3:// objects can be deleted", ErrUnsupported, raw)
	}
	err = c.do(context.Background(), "DELETE", loc, func(ctx context.Context) (*http.Request, error) {
		return c.request(ctx, http.MethodDelete, loc, loc.url, nil, emptyHash)
	}, func(*http.Response) error { return nil })
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
