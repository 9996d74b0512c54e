package core

import (
	"bytes"
	"testing"
)

func TestRememberedTextIsTheLastCopyKeptPerURL(t *testing.T) {
	dir := t.TempDir()
	if _, ok := RememberedText(dir, "s3://b/ds/spec.json"); ok {
		t.Fatal("a copy found before any was kept")
	}
	RememberText(dir, "s3://b/ds/spec.json", []byte("v1"))
	RememberText(dir, "s3://b/other/spec.json", []byte("other"))
	RememberText(dir, "s3://b/ds/spec.json", []byte("v2"))
	if got, ok := RememberedText(dir, "s3://b/ds/spec.json"); !ok || !bytes.Equal(got, []byte("v2")) {
		t.Fatalf("got %q, %v; want the last copy kept, v2", got, ok)
	}
	RememberText("", "s3://b/ds/spec.json", []byte("v3")) // no cache directory: nothing kept
	if _, ok := RememberedText("", "s3://b/ds/spec.json"); ok {
		t.Fatal("a copy found without a cache directory")
	}
}
