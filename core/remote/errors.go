package remote

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

var (
	// ErrBadURL: a URL that names no object this package can reach.
	ErrBadURL = errors.New("bad URL")
	// ErrShortBody: a response carried fewer bytes than its range asked for, again after a
	// retry.
	ErrShortBody = errors.New("response body cut short")
	// ErrUnsupported: an operation the URL's scheme cannot do (listing or writing over
	// plain HTTP).
	ErrUnsupported = errors.New("not supported")
	// ErrChanged: the object was replaced since it was opened (its ETag is another, or
	// the store refused a read conditional on the ETag seen at open).
	ErrChanged = errors.New("the object changed since it was opened")
)

// changedError is ErrChanged with the ETags, and the errno a stale NFS file handle gets
// (ESTALE), so that the C ABI reports it as the operating-system error it resembles.
type changedError struct{ opened, now string }

func (e *changedError) Error() string {
	if e.now == "" {
		return fmt.Sprintf("%v (a read conditional on its ETag %q failed)", ErrChanged, e.opened)
	}
	return fmt.Sprintf("%v (ETag %q when opened, %q now)", ErrChanged, e.opened, e.now)
}

func (e *changedError) Unwrap() []error { return []error{ErrChanged, syscall.ESTALE} }

// statusError is an HTTP answer that is a failure.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string {
	if e.body != "" {
		return fmt.Sprintf("HTTP %d: %s", e.code, e.body)
	}
	return fmt.Sprintf("HTTP %d", e.code)
}

// retryable reports whether an answer with this status may succeed when sent again.
func retryable(code int) bool {
	return code >= 500 || code == 429 || code == 408
}

// opError puts an operation and its URL around err. 403 and 404 become a *fs.PathError
// over EACCES and ENOENT, so that callers (and the C ABI) see a permission error and a
// missing file as they would for a local path.
func opError(op, url string, err error) error {
	var se *statusError
	if errors.As(err, &se) {
		switch se.code {
		case 403:
			return &fs.PathError{Op: op, Path: url, Err: permissionDenied{se}}
		case 404:
			return &fs.PathError{Op: op, Path: url, Err: notFound{se}}
		}
	}
	var ce *changedError
	if errors.As(err, &ce) {
		return &fs.PathError{Op: op, Path: url, Err: ce}
	}
	return fmt.Errorf("%s %s: %w", op, url, err)
}

// permissionDenied and notFound are an HTTP answer that unwraps to its errno.
type permissionDenied struct{ *statusError }

func (e permissionDenied) Unwrap() error { return syscall.EACCES }

type notFound struct{ *statusError }

func (e notFound) Unwrap() error { return syscall.ENOENT }

// heldByAnother is an object that DeleteIfHolds left: it holds another writer's data (EEXIST).
type heldByAnother struct{}

func (heldByAnother) Error() string { return "the object holds another writer's data: left in place" }

func (heldByAnother) Unwrap() error { return syscall.EEXIST }

// alreadyExists is a conditional PUT's 412: an object has the key (EEXIST).
type alreadyExists struct{ *statusError }

func (e alreadyExists) Unwrap() error { return syscall.EEXIST }
