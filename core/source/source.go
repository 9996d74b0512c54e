// Package source is the one place where sample bytes come from: a Source reads byte
// ranges of one file or object. Local files, HTTP(S) and S3 objects (package remote) are
// Sources, and the node-local chunk cache (Cached) is a Source that sits under any other.
// A new backend (GCS, Azure) implements Source and is chosen in Open; a new cache policy
// wraps a Source the way Cached does.
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

// Invalidator is a Source that keeps copies (a cache): Invalidate drops the copies of
// bytes [off, end) found damaged, so that the next read fetches them again.
type Invalidator interface {
	Invalidate(off, end int64)
}

// ErrCache: the chunk cache cannot be used as configured (a directory that cannot be
// written, a full disk, a limit smaller than the working set).
var ErrCache = errors.New("chunk cache")

// Open opens the file or object at name: a URL through its remote store (with opts),
// anything else as a local file. stats, when not nil, counts the requests made.
func Open(name string, opts remote.Options, stats *Stats) (Source, error) {
	var src Source
	var err error
	if remote.IsURL(name) {
		src, err = openRemote(name, opts, stats)
	} else {
		src, err = OpenFile(name)
	}
	if err != nil {
		return nil, err
	}
	return src, nil
}

// rangeError is err as the error of the one span of a single-span read.
func rangeError(off int64, n int, err error) error {
	if err == nil {
		return nil
	}
	var se *SpanError
	if errors.As(err, &se) {
		return err
	}
	return &SpanError{Index: 0, Off: off, End: off + int64(n), Err: err}
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
