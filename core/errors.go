package core

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps at most one of them,
// together with the file name and, where one applies, the sample index; test with
// errors.Is.
var (
	// ErrChecksum: a stored CRC-32 (of the metadata or of a sample) does not match the
	// bytes it covers.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrCorrupt: the file breaks a structural rule of the format (a header cut short,
	// offsets out of order or outside the file, sample data cut short, a malformed
	// extension record).
	ErrCorrupt = errors.New("corrupt file")
	// ErrIndex: a sample index outside [0, N).
	ErrIndex = errors.New("index out of range")
	// ErrClosed: a call on a Reader or Writer after Close.
	ErrClosed = errors.New("use of closed file")
	// ErrInvalid: an argument the call cannot accept (writing more samples than declared,
	// closing with fewer, a destination buffer too small, an empty path list, ...).
	ErrInvalid = errors.New("invalid argument")
)

// IsCorruption reports whether err means the data on disk is damaged, as opposed to a
// misuse of the API or an operating-system failure.
func IsCorruption(err error) bool {
	return errors.Is(err, ErrChecksum) || errors.Is(err, ErrCorrupt)
}

// fileError attaches the file and, when index >= 0, the sample index to an error.
type fileError struct {
	path  string
	index int64
	err   error
}

func (e *fileError) Error() string {
	if e.index >= 0 {
		return fmt.Sprintf("%s: sample %d: %v", e.path, e.index, e.err)
	}
	return fmt.Sprintf("%s: %v", e.path, e.err)
}

func (e *fileError) Unwrap() error { return e.err }

// errorf wraps sentinel (may be nil) with context: "path: sample i: sentinel: detail".
func errorf(path string, index int64, sentinel error, format string, args ...any) error {
	detail := fmt.Sprintf(format, args...)
	var err error
	switch {
	case sentinel == nil:
		err = errors.New(detail)
	case detail == "":
		err = sentinel
	default:
		err = fmt.Errorf("%w: %s", sentinel, detail)
	}
	return &fileError{path: path, index: index, err: err}
}
