package core

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// forgetVerified empties the process-wide record, so that each test starts from nothing.
func forgetVerified(t *testing.T) {
	t.Helper()
	clearRecord := func() {
		verifiedFiles.Lock()
		clear(verifiedFiles.ids)
		verifiedFiles.Unlock()
	}
	clearRecord()
	t.Cleanup(clearRecord)
}

// settledFile writes a small dataset and waits until it is old enough for a verification
// to vouch for it.
func settledFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "v.ffr")
	writeSamples(t, path, [][]byte{[]byte("a"), []byte("bb"), []byte("ccc")}, WriterOptions{})
	time.Sleep(settledAge + 50*time.Millisecond)
	return path
}

func TestVerifiedIdentityIsHandedOnAndChangeForcesTheCheck(t *testing.T) {
	forgetVerified(t)
	path := settledFile(t)
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	ids := r.Verified()
	if len(ids) != 1 || ids[0].Size != r.files[0].size {
		t.Fatalf("Verified = %+v, want the one file", ids)
	}
	if unchecked := openReader(t, ReaderOptions{}, path); len(unchecked.Verified()) != 0 {
		t.Fatal("a reader without checks vouches for its files")
	}
	again := openReader(t, ReaderOptions{CheckData: true}, path)
	if got := again.Verified(); len(got) != 1 || got[0] != ids[0] {
		t.Fatalf("reopened: Verified = %+v, want %+v", got, ids)
	}

	flipBit(t, path, 0) // the metadata checksum; a write: the file has another identity now
	for _, vouched := range [][]FileIdentity{nil, ids} {
		_, err := Open([]string{path}, ReaderOptions{CheckData: true, Verified: vouched})
		if !errors.Is(err, ErrChecksum) {
			t.Fatalf("changed file, vouched %v: err = %v, want ErrChecksum", vouched, err)
		}
	}
}

// A vouched identity is trusted exactly: the damaged header of the file it names is not
// read again, and any other identity (here one of its fields off by one) is checked.
func TestVouchedIdentityMustMatchExactly(t *testing.T) {
	forgetVerified(t)
	path := filepath.Join(t.TempDir(), "v.ffr")
	writeSamples(t, path, [][]byte{[]byte("a"), []byte("bb")}, WriterOptions{})
	flipBit(t, path, 0) // the metadata checksum
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	id, err := identityOf(int(f.Fd()), path)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := openReader(t, ReaderOptions{CheckData: true, Verified: []FileIdentity{id}}, path)
	if got := r.Verified(); len(got) != 1 || got[0] != id {
		t.Fatalf("Verified = %+v, want %+v", got, id)
	}
	for _, off := range []func(*FileIdentity){
		func(v *FileIdentity) { v.Dev++ }, func(v *FileIdentity) { v.Ino++ },
		func(v *FileIdentity) { v.Size++ }, func(v *FileIdentity) { v.MtimeNs++ },
		func(v *FileIdentity) { v.CtimeNs++ },
	} {
		other := id
		off(&other)
		_, err := Open([]string{path}, ReaderOptions{CheckData: true, Verified: []FileIdentity{other}})
		if !errors.Is(err, ErrChecksum) {
			t.Fatalf("vouched %+v for %+v: err = %v, want ErrChecksum", other, id, err)
		}
	}
}

// A file that changed just before it was checked is not vouched for: a change in the
// same tick of the file clock could leave its times as they were.
func TestFreshFileIsNotVouchedFor(t *testing.T) {
	forgetVerified(t)
	path := filepath.Join(t.TempDir(), "v.ffr")
	writeSamples(t, path, [][]byte{[]byte("a")}, WriterOptions{})
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	if got := r.Verified(); len(got) != 0 {
		t.Fatalf("Verified = %+v for a file written just now", got)
	}
}
