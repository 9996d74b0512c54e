package core

import (
	"bufio"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// residentKiB is this process's resident memory (VmRSS) in KiB: anonymous memory plus
// every mapped file page currently in its page tables.
func residentKiB(t *testing.T) int64 { return statusKiB(t, "VmRSS") }

// statusKiB is a field of /proc/self/status counted in KiB (VmRSS, RssFile, VmPTE).
func statusKiB(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Fatal(field + " not found")
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

// Reading a dataset far larger than mappedBudget, in shuffled batches and with checks,
// leaves this process's page tables and mapped file pages bounded by the budget, not grown
// with the bytes read: sample data goes straight to the caller's buffer, and the header
// (itself larger than the budget here) is dropped behind the lookups.
func TestReadingStaysWithinMappedBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine memory measurement; runs without -race")
	}
	const (
		n      = 100_000
		size   = 2 << 10 // 200 MiB of data, 1.2 MB of header
		budget = 1 << 20
		batch  = 256
	)
	defer setMappedBudget(budget)()
	path := filepath.Join(t.TempDir(), "big.ffr")
	w, err := Create(path, n, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sample := make([]byte, size)
	for i := range n {
		sample[0] = byte(i)
		if err := w.WriteOne(sample); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := openReader(t, ReaderOptions{CheckData: true}, path)
	pte, rss := statusKiB(t, "VmPTE"), statusKiB(t, "RssFile")
	order := rand.New(rand.NewPCG(3, 4)).Perm(n)
	indices, sizes := make([]uint64, batch), make([]uint64, batch)
	dst := make([]byte, batch*size)
	for first := 0; first < n; first += batch {
		indices = indices[:min(batch, n-first)]
		for k := range indices {
			indices[k] = uint64(order[first+k])
		}
		if err := r.ReadBatch(indices, dst, sizes); err != nil {
			t.Fatal(err)
		}
		for k, index := range indices {
			if got := dst[k*size]; got != byte(index) {
				t.Fatalf("sample %d starts with %d", index, got)
			}
		}
	}
	// Mapping the 200 MiB read would take 400 KiB of page tables and 200 MiB of RssFile.
	grownPTE, grownRSS := statusKiB(t, "VmPTE")-pte, statusKiB(t, "RssFile")-rss
	t.Logf("read %d MiB: VmPTE %+d KiB, RssFile %+d KiB", n*size>>20, grownPTE, grownRSS)
	if grownPTE > 64 {
		t.Errorf("page tables grew by %d KiB, want at most 64 KiB", grownPTE)
	}
	if grownRSS > 4*budget>>10 {
		t.Errorf("mapped file pages grew by %d KiB, want at most %d KiB", grownRSS, 4*budget>>10)
	}
}
