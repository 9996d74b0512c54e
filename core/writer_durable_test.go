package core

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// A writer told SetDurable(false) skips the fsyncs, not the work: the file is complete,
// in place, and reads back as written, for a known and an unknown count.
func TestVolatileWriterWritesTheSameFile(t *testing.T) {
	for _, n := range []uint64{40, UnknownCount} {
		dir := t.TempDir()
		want := make([][]byte, 40)
		for i := range want {
			want[i] = bytes.Repeat([]byte{byte(i)}, 1000+i*3000)
		}
		paths := map[bool]string{}
		for _, durable := range []bool{true, false} {
			path := filepath.Join(dir, map[bool]string{true: "durable.ffr", false: "volatile.ffr"}[durable])
			w, err := Create(path, n, WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			w.SetDurable(durable)
			for _, sample := range want {
				if err := w.WriteOne(sample); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			paths[durable] = path
		}
		a, err := os.ReadFile(paths[true])
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(paths[false])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("n=%d: the volatile file differs from the durable one", n)
		}
		r, err := Open([]string{paths[false]}, ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, r)
		r.Close()
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("n=%d: sample %d differs", n, i)
			}
		}
	}
}
