package core

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// residentKiB is this process's resident memory (VmRSS) in KiB: anonymous memory plus
// every mapped file page currently in its page tables.
func residentKiB(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Fatal("VmRSS not found")
	return 0
}

// Opening a file of 5M samples with checks on (a full pass over its 60 MB header) must
// leave the header in the page cache, not in this process: under 16 MiB more resident.
func TestOpenHugeHeaderStaysOutOfProcessMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine memory measurement; runs without -race")
	}
	const n = 5_000_000
	path := filepath.Join(memoryDir(t), "huge.ffr")
	w, err := Create(path, n, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := w.WriteOne(nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = nil
	before := residentKiB(t)
	start := time.Now()
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	opened := time.Since(start)
	grown := residentKiB(t) - before
	if r.Len() != n {
		t.Fatalf("Len = %d", r.Len())
	}
	if grown > 16<<10 {
		t.Fatalf("opening grew resident memory by %d KiB, want < 16 MiB", grown)
	}
	start = time.Now()
	unchecked := openReader(t, ReaderOptions{}, path)
	openedUnchecked := time.Since(start)
	_ = unchecked.Close()
	start = time.Now()
	header, err := os.ReadFile(path) // what copying the header into memory costs at least
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("open with checks: %v, +%d KiB resident; without: %v; reading the %d-byte header: %v",
		opened, grown, openedUnchecked, len(header), time.Since(start))
}
