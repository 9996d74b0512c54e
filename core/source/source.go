// Package source is where the bytes of a remote file come from: a Source reads byte ranges
// of one object. HTTP(S) and S3 objects (package remote) are Sources, and the node-local
// chunk cache (Cached) is a Source over any other. A new backend (GCS, Azure) implements
// Source (and SpanReader when it can read a span in one request) and is chosen in Open; a
// new cache policy wraps a Source the way Cached does. Local files are not Sources: the
// core maps them and reads them through its I/O engines (core/internal/engine).
package source

import (
	"errors"
	"fmt"

	"github.com/ffrecord/ffrecord/core/remote"
)

// Span is len(Buf) bytes of a source from offset Off.
type Span = remote.Span

// SpanError is the failure to read span Index of a ReadRanges call.
type SpanError = remote.SpanError

// Source reads byte ranges of one file or object of fixed size and version. It is safe for
// concurrent use.
type Source interface {
	// Name is the path or URL, for messages.
	Name() string
	// Size is the number of bytes.
	Size() int64
	// Version identifies the content (an ETag); "" when the store gives none, and then the
	// content cannot be cached.
	Version() string
	// ReadRanges fills every span's buffer. A failure is a *SpanError naming a span.
	ReadRanges(spans []Span) error
	// Close releases what the source holds.
	Close() error
}

// SpanReader is a Source that can read one span with exactly one request (an object
// store's ranged GET); the chunk cache then downloads each chunk in one request, where
// ReadRanges may split or merge spans.
type SpanReader interface {
	ReadSpan(sp Span) error
}

// Invalidator is a Source that keeps copies (a cache): Invalidate drops the copies of
// bytes [off, end) found damaged, so that the next read fetches them again.
type Invalidator interface {
	Invalidate(off, end int64)
}

// ErrCache: the chunk cache cannot be used as configured (a directory that cannot be
// written, or that another user could write: cachedir.go; a full disk; a limit smaller
// than the working set).
var ErrCache = errors.New("chunk cache")

// Open opens the object at url through its store (with opts); stats, when not nil, counts
// the requests made. HTTP(S) and S3 URLs both go to package remote's client; a new store
// is chosen here, by the URL's scheme.
func Open(url string, opts remote.Options, stats *Stats) (Source, error) {
	return openRemote(url, opts, stats)
}

// describe formats a byte count for messages.
func describe(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// OptionsError is a failure to open a source that is the options' or the name's fault (a
// bad endpoint, scheme or option), not the store's answer.
type OptionsError struct{ Err error }

func (e *OptionsError) Error() string { return e.Err.Error() }
func (e *OptionsError) Unwrap() error { return e.Err }
