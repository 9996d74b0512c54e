package source

import (
	"fmt"
	"io"
	"os"
)

// File is a local file as a Source.
type File struct {
	f    *os.File
	size int64
}

// OpenFile opens a local file.
func OpenFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return &File{f: f, size: info.Size()}, nil
}

func (s *File) Name() string    { return s.f.Name() }
func (s *File) Size() int64     { return s.size }
func (s *File) Version() string { return "" } // a local file is not cached
func (s *File) Close() error    { return s.f.Close() }

// ReadRanges reads each span with pread.
func (s *File) ReadRanges(spans []Span) error {
	for k, sp := range spans {
		if _, err := s.f.ReadAt(sp.Buf, sp.Off); err != nil {
			if err == io.EOF {
				err = fmt.Errorf("%w: bytes [%d, %d) are past the end of the %d-byte file",
					io.ErrUnexpectedEOF, sp.Off, sp.Off+int64(len(sp.Buf)), s.size)
			}
			return &SpanError{Index: k, Off: sp.Off, End: sp.Off + int64(len(sp.Buf)), Err: err}
		}
	}
	return nil
}
