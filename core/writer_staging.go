package core

import (
	"fmt"
	"os"

	"github.com/ffrecord/ffrecord/core/internal/engine"
	"golang.org/x/sys/unix"
)

// moveBehindHeader copies the staged data of an UnknownCount writer into a second
// temporary file, behind room for the header that is now known, and drops the staging
// file. w.tmp becomes the new file.
func (w *Writer) moveBehindHeader() (*os.File, error) {
	dataAt, ok := headerSize(uint64(len(w.offsets)))
	if !ok {
		return nil, fmt.Errorf("%w: %s: %d samples do not fit the format", ErrInvalid, w.path, len(w.offsets))
	}
	final, err := createTemp(w.path)
	if err != nil {
		return nil, err
	}
	staged := w.tmp
	w.tmp = final
	err = copyRange(final, staged, int64(dataAt), int64(w.pos))
	_ = staged.Close()
	_ = os.Remove(staged.Name())
	if err != nil {
		return nil, fmt.Errorf("%s: copying staged data: %w", w.path, err)
	}
	w.dataAt = dataAt
	return final, nil
}

// copyRange copies the first n bytes of src to dst at offset at, inside the kernel when
// it can (copy_file_range), else through a buffer.
func copyRange(dst, src *os.File, at, n int64) error {
	var done int64
	for done < n {
		roff, woff := done, at+done
		c, err := unix.CopyFileRange(int(src.Fd()), &roff, int(dst.Fd()), &woff, int(min(n-done, int64(engine.MaxChunk))), 0)
		if err != nil || c == 0 {
			break
		}
		done += int64(c)
	}
	buf := make([]byte, min(n-done, writeBuffer))
	for done < n {
		c, err := src.ReadAt(buf[:min(int64(len(buf)), n-done)], done)
		if c > 0 {
			if _, werr := dst.WriteAt(buf[:c], at+done); werr != nil {
				return werr
			}
			done += int64(c)
		}
		if err != nil && done < n {
			return err
		}
	}
	return nil
}
