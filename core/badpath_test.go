package core

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// withinDeadline fails the test if call has not returned within a few seconds: the inputs
// here used to block forever (an open of a FIFO waits for a writer).
func withinDeadline(t *testing.T, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("call still blocked after 10s")
		return nil
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.ffr")
	writeSamples(t, good, [][]byte{[]byte("x")}, WriterOptions{})
	fifo := filepath.Join(dir, "pipe.ffr")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	withFifo := filepath.Join(dir, "dataset")
	if err := os.Mkdir(withFifo, 0o755); err != nil {
		t.Fatal(err)
	}
	writeSamples(t, filepath.Join(withFifo, "a.ffr"), [][]byte{[]byte("a")}, WriterOptions{})
	if err := unix.Mkfifo(filepath.Join(withFifo, "b.ffr"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		paths []string
		want  error
		names string // in the message
	}{
		{"fifo", []string{fifo}, ErrInvalid, "pipe.ffr: invalid argument: not a regular file but a FIFO"},
		{"fifo in a directory", []string{withFifo}, ErrInvalid, "b.ffr: invalid argument: not a regular file but a FIFO"},
		{"fifo after a good file", []string{good, fifo}, ErrInvalid, "pipe.ffr"},
		{"character device", []string{"/dev/null"}, ErrInvalid, "not a regular file but a character device"},
		{"nul byte", []string{good + "\x00/whatever"}, ErrInvalid, `path "` + good + `\x00/whatever" contains a NUL byte`},
		{"nul byte only", []string{"\x00"}, ErrInvalid, "NUL byte"},
		{"missing", []string{filepath.Join(dir, "missing.ffr")}, fs.ErrNotExist, "missing.ffr"},
		{"empty directory", []string{t.TempDir()}, ErrInvalid, "holds no *.ffr file"},
		{"no paths", nil, ErrInvalid, "no path given"},
	} {
		for _, direct := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/direct=%v", tc.name, direct), func(t *testing.T) {
				err := withinDeadline(t, func() error {
					r, err := Open(tc.paths, ReaderOptions{CheckData: true, Direct: direct})
					if err == nil {
						_ = r.Close()
					}
					return err
				})
				if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.names) {
					t.Fatalf("err = %v, want %v naming %q", err, tc.want, tc.names)
				}
			})
		}
	}
}

// The descriptors the engine reads through are blocking again: io_uring honours O_NONBLOCK
// and would fail every read that misses the page cache with EAGAIN.
func TestOpenRegularLeavesBlockingDescriptors(t *testing.T) {
	path := tempPath(t, "f.ffr")
	writeSamples(t, path, [][]byte{[]byte("x")}, WriterOptions{})
	for _, flags := range []int{0, unix.O_DIRECT} {
		fd, size, err := openRegular(path, flags)
		if errors.Is(err, unix.EINVAL) && flags != 0 {
			continue // no O_DIRECT on this file system
		}
		if err != nil {
			t.Fatal(err)
		}
		status, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		_ = unix.Close(fd)
		if err != nil || status&unix.O_NONBLOCK != 0 || status&flags != flags || size != 12+12+1 {
			t.Fatalf("flags %#x: status %#x (err %v), size %d", flags, status, err, size)
		}
	}
}

func TestCreateRefusesImpossibleTargetsAtOnce(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       []error
		message    string
	}{
		{"directory", dir, []error{ErrInvalid, unix.EISDIR}, dir + ": invalid argument: is a directory"},
		{"trailing slash", filepath.Join(dir, "new") + "/", []error{ErrInvalid, unix.EISDIR}, "is a directory"},
		{"dot", ".", []error{ErrInvalid, unix.EISDIR}, "is a directory"},
		{"nul byte", filepath.Join(dir, "x.ffr\x00.txt"), []error{ErrInvalid}, `x.ffr\x00.txt" contains a NUL byte`},
		{"missing parent", filepath.Join(dir, "no", "x.ffr"), []error{fs.ErrNotExist},
			"create " + filepath.Join(dir, "no", "x.ffr") + ": no such file or directory"},
		{"parent is a file", filepath.Join(file, "x.ffr"), []error{unix.ENOTDIR}, "create " + file},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Create(tc.path, 1, WriterOptions{})
			if err == nil {
				_ = w.Abort()
				t.Fatalf("Create(%q) succeeded", tc.path)
			}
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Errorf("err = %v, want %v", err, want)
				}
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Errorf("err = %q, want it to contain %q", err, tc.message)
			}
		})
	}
	onlyEntries(t, dir, "file")
}
