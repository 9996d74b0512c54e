package abi

import (
	"encoding/json"
	"testing"
	"unsafe"

	"github.com/ffrecord/ffrecord/core"
	"github.com/ffrecord/ffrecord/core/remote"
)

// ffr_fetched_text gives the copy of a document its cache directory kept, says plainly
// when none was kept, and refuses missing arguments and bad options without a request.
func TestFetchedTextGivesTheKeptCopyOrSaysThereIsNone(t *testing.T) {
	dir := t.TempDir()
	options, err := json.Marshal(map[string]string{"cache_dir": dir})
	if err != nil {
		t.Fatal(err)
	}
	opts := append(options, 0)
	url := append([]byte("https://example.invalid/ds/spec.json"), 0)
	var needed uintptr
	fetched := func() int32 {
		return FetchedText(unsafe.Pointer(&url[0]), unsafe.Pointer(&opts[0]), nil, 0, unsafe.Pointer(&needed))
	}
	expect(t, StatusNotFound, fetched, "no copy of this document kept")
	core.RememberText(remote.Options{CacheDir: dir}, "https://example.invalid/ds/spec.json", []byte(`{"fields": {}}`))
	got := listText(t, func(buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) int32 {
		return FetchedText(unsafe.Pointer(&url[0]), unsafe.Pointer(&opts[0]), buf, size, needed)
	})
	if got != `{"fields": {}}` {
		t.Fatalf("kept copy %q", got)
	}
	expect(t, StatusInvalid, func() int32 { return FetchedText(nil, nil, nil, 0, unsafe.Pointer(&needed)) }, "url or needed is NULL")
	bad := append([]byte(`{"timeout": "soon"}`), 0)
	expect(t, StatusInvalid, func() int32 {
		return FetchedText(unsafe.Pointer(&url[0]), unsafe.Pointer(&bad[0]), nil, 0, unsafe.Pointer(&needed))
	}, "timeout")
}
