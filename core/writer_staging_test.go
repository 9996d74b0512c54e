package core

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A writer told no count places its data three ways (writer_staging.go); every way, and a
// memory stage that runs out of room on the way, writes the same bytes as a writer told the
// count, leaves no temporary file and gives its memory back.
func TestUnknownCountPlacements(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	small := randomSamples(rng, 300, 2000)
	bulk := randomSamples(rng, 40, 2*directWriteMin/40)
	large := [][]byte{make([]byte, directWriteMin+3), make([]byte, vectorWriteMin)}
	for _, s := range large {
		fillRandom(rng, s)
	}
	type call struct {
		how     string // one, batch or vectors
		samples [][]byte
	}
	cases := []struct {
		name  string
		calls []call
		// placed: after the first call, the data is in the file, placed for that call's
		// samples; otherwise it is still in memory.
		placed bool
	}{
		{"one bulk batch", []call{{"batch", bulk}}, true},
		{"one bulk vector write", []call{{"vectors", slices.Concat(bulk, large)}}, true},
		{"bulk then more", []call{{"batch", bulk}, {"one", small[:1]}, {"vectors", large}, {"batch", small[1:]}}, true},
		{"small pieces", []call{{"one", small[:100]}, {"batch", small[100:]}, {"one", large[:1]}}, false},
		{"small then bulk", []call{{"one", small[:3]}, {"batch", bulk}, {"vectors", large}}, false},
		{"nothing", nil, false},
	}
	for _, limit := range []int64{memoryStagingLimit, 100 << 10} {
		roomy := limit > 1<<20 // the limit holds every case's data
		for _, comp := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					defer setStagingLimit(limit)()
					dir := t.TempDir()
					var all [][]byte
					for _, cl := range c.calls {
						all = append(all, cl.samples...)
					}
					known, unknown := filepath.Join(dir, "known.ffr"), filepath.Join(dir, "unknown.ffr")
					writeSamples(t, known, all, WriterOptions{Compression: comp})
					w, err := Create(unknown, UnknownCount, WriterOptions{Compression: comp})
					if err != nil {
						t.Fatal(err)
					}
					for k, cl := range c.calls {
						switch cl.how {
						case "one":
							for _, s := range cl.samples {
								err = w.WriteOne(s)
							}
						case "batch":
							sizes := make([]uint64, len(cl.samples))
							for j, s := range cl.samples {
								sizes[j] = uint64(len(s))
							}
							err = w.WriteBatch(bytes.Join(cl.samples, nil), sizes)
						case "vectors":
							err = w.WriteVectors(cl.samples)
						}
						if err != nil {
							t.Fatal(err)
						}
						if k == 0 && roomy {
							want, _ := headerSize(w.storedCount(uint64(len(cl.samples))))
							if c.placed && (w.stage != nil || w.dataAt != want) {
								t.Fatalf("a first bulk write was not placed for its %d samples", len(cl.samples))
							}
							if !c.placed && w.stage == nil {
								t.Fatal("small writes left the memory stage")
							}
						}
						if memoryStaged.Load() > limit {
							t.Fatalf("%d bytes in memory stages, over the limit of %d", memoryStaged.Load(), limit)
						}
					}
					if err := w.Close(); err != nil {
						t.Fatal(err)
					}
					a, _ := os.ReadFile(known)
					b, _ := os.ReadFile(unknown)
					if !bytes.Equal(a, b) {
						t.Fatal("a file written without its count differs from the same samples written with it")
					}
					onlyEntries(t, dir, "known.ffr", "unknown.ffr")
					if got := memoryStaged.Load(); got != 0 {
						t.Fatalf("%d bytes still counted in memory stages after Close", got)
					}
				})
			}
		}
	}
}

// The memory stages of all writers share one limit: a writer that finds it taken moves its
// data to its file, and Abort gives the memory back.
func TestMemoryStagesShareTheLimit(t *testing.T) {
	defer setStagingLimit(3 << 20)()
	dir := t.TempDir()
	samples := make([][]byte, 150) // 1.5 MB: fits the limit alone, not twice
	for k := range samples {
		samples[k] = bytes.Repeat([]byte{byte(k)}, 10000)
	}
	first, err := Create(filepath.Join(dir, "first.ffr"), UnknownCount, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := Create(filepath.Join(dir, "second.ffr"), UnknownCount, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []*Writer{first, second} {
		for _, s := range samples {
			if err := w.WriteOne(s); err != nil {
				t.Fatal(err)
			}
			if memoryStaged.Load() > memoryStagingLimit {
				t.Fatalf("%d bytes in memory stages, over the limit of %d", memoryStaged.Load(), memoryStagingLimit)
			}
		}
	}
	if first.stage == nil || second.stage != nil {
		t.Fatalf("the first writer should hold its data in memory and the second none (%v, %v)",
			first.stage != nil, second.stage != nil)
	}
	if err := first.Abort(); err != nil {
		t.Fatal(err)
	}
	if got := memoryStaged.Load(); got != 0 {
		t.Fatalf("%d bytes still counted after Abort", got)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	r := openReader(t, ReaderOptions{CheckData: true}, filepath.Join(dir, "second.ffr"))
	assertSamples(t, readAll(t, r), samples)
	onlyEntries(t, dir, "second.ffr")
}

// setStagingLimit sets memoryStagingLimit for a test and returns what restores it.
func setStagingLimit(limit int64) func() {
	old := memoryStagingLimit
	memoryStagingLimit = limit
	return func() { memoryStagingLimit = old }
}

// A first bulk write that fails to reach the file loses it, as any failed write does:
// later calls report the failure and nothing appears at the path.
func TestFailedPlacementLosesTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "lost.ffr")
	w, err := Create(path, UnknownCount, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = w.tmp.Close() // every write to it now fails
	data := make([]byte, directWriteMin)
	if err := w.WriteBatch(data, []uint64{uint64(len(data))}); err == nil {
		t.Fatal("a bulk write to a closed file succeeded")
	}
	if err := w.WriteOne([]byte("x")); err == nil {
		t.Fatal("a write after a failed one succeeded")
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close after a failed write succeeded")
	}
	onlyEntries(t, dir)
}
