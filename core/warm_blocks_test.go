package core

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Lone reads of a dataset past mappedBudget (warm_blocks.go): warm samples are copied from the
// mapping until the budget's worth of fault-around blocks is mapped, cold ones are read
// with pread. Either way a sample reads back whole (in either of two files) and a damaged
// one is refused, and the mapped file pages stay within the budget.
func TestLoneReadsPastTheBudget(t *testing.T) {
	const (
		size   = 16 << 10
		na, nb = 1000, 40 // 16 MiB: past the read-around of a fault on the header
		budget = 2 * warmBlock
	)
	defer setMappedBudget(budget)()
	paths := []string{damagedFile(t, "a.ffr", na, size, 9), damagedFile(t, "b.ffr", nb, size, 30)}
	r := openReader(t, ReaderOptions{CheckData: true}, paths...)
	if !r.window.streamData {
		t.Fatal("the data is not streamed past the budget")
	}
	// reads sample i, reporting what is wrong with it (goroutines may not t.Fatal)
	check := func(i int, dst []byte) error {
		sizes := make([]uint64, 1)
		err := r.ReadBatch([]uint64{uint64(i)}, dst, sizes)
		if i == 9 || i == na+30 {
			if !errors.Is(err, ErrChecksum) {
				return fmt.Errorf("damaged sample %d: err = %v", i, err)
			}
			return nil
		}
		local := i % na
		if i >= na {
			local = i - na
		}
		want := bytes.Repeat([]byte{'0' + byte(local%10)}, size)
		if err != nil || sizes[0] != size || !bytes.Equal(dst, want) {
			return fmt.Errorf("sample %d: err %v, size %d", i, err, sizes[0])
		}
		return nil
	}
	read := func(i int) {
		t.Helper()
		if err := check(i, make([]byte, size)); err != nil {
			t.Fatal(err)
		}
	}

	read(1)
	rss := statusKiB(t, "RssFile")
	order := rand.New(rand.NewPCG(1, 2)).Perm(na + nb)
	for _, i := range order {
		read(i)
	}
	// again, four goroutines at once, each a quarter of the order
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for g := range errs {
		wg.Go(func() {
			dst := make([]byte, size)
			for _, i := range order[g*len(order)/4 : (g+1)*len(order)/4] {
				if errs[g] = check(i, dst); errs[g] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if mapped, want := r.warm.mapped.Load(), uint64(budget/warmBlock); mapped != want {
		t.Errorf("%d blocks mapped, want the budget's %d", mapped, want)
	}
	// the blocks counted, and the headers' pages
	if grown := statusKiB(t, "RssFile") - rss; !raceEnabled && grown > (budget+faultAround)>>10 {
		t.Errorf("mapped file pages grew by %d KiB, want at most %d KiB", grown, (budget+faultAround)>>10)
	}

	// A cold sample is read with pread, mapping nothing: a fault would read around it.
	r = openReader(t, ReaderOptions{CheckData: true}, paths...)
	syncFile(t, paths[0]) // damagedFile's rewrite is dirty, and eviction skips dirty pages
	evict(t, paths[0])
	cold := uint64(na - 20)
	if cached, _ := cachedPages(t, r, []uint64{cold}); cached != 0 {
		t.Skipf("%d pages of sample %d stay cached after eviction: cannot read it cold here", cached, cold)
	}
	if read(int(cold)); r.warm.mapped.Load() != 0 {
		t.Fatalf("cold sample %d read through the mapping", cold)
	}
}

func syncFile(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// Lone reads and batches past the budget give every compression's samples back exactly,
// whether copied from the mapping (the first warm block) or read with pread (the rest, the
// budget spent), and write nothing past the samples in the caller's buffer.
func TestLoneReadsOfEveryCompression(t *testing.T) {
	defer setMappedBudget(warmBlock)()
	rng := rand.New(rand.NewPCG(3, 4))
	samples := make([][]byte, 400)
	for i := range samples { // half noise, half runs: compressed to about 8 KiB each
		samples[i] = append(make([]byte, 0, 16<<10), bytes.Repeat([]byte{byte(i)}, 8<<10)...)
		for range 8 << 10 {
			samples[i] = append(samples[i], byte(rng.Uint32()))
		}
	}
	for _, compression := range []Compression{CompressNone, CompressLZ4, CompressZstd} {
		t.Run(fmt.Sprint(compression), func(t *testing.T) {
			path := tempPath(t, "c.ffr")
			writeSamples(t, path, samples, WriterOptions{Compression: compression})
			r := openReader(t, ReaderOptions{CheckData: true}, path)
			if !r.window.streamData {
				t.Fatal("the data is not streamed past the budget")
			}
			const guard = 64
			dst, sizes := make([]byte, (16<<10)+guard), make([]uint64, 1)
			for _, i := range rng.Perm(len(samples)) {
				for k := range dst {
					dst[k] = 0xA5
				}
				if err := r.ReadBatch([]uint64{uint64(i)}, dst, sizes); err != nil {
					t.Fatalf("sample %d: %v", i, err)
				}
				n := len(samples[i])
				if sizes[0] != uint64(n) || !bytes.Equal(dst[:n], samples[i]) {
					t.Fatalf("sample %d: size %d, bytes differ", i, sizes[0])
				}
				if !bytes.Equal(dst[n:], bytes.Repeat([]byte{0xA5}, len(dst)-n)) {
					t.Fatalf("sample %d: bytes past it written", i)
				}
			}
			if r.warm.mapped.Load() != 1 {
				t.Fatalf("%d blocks read through the mapping, want the budget's 1", r.warm.mapped.Load())
			}
			// all of them in one batch: the first block's from the mapping, the rest read
			order := rng.Perm(len(samples))
			indices, want := make([]uint64, len(order)), []byte(nil)
			for k, i := range order {
				indices[k] = uint64(i)
				want = append(want, samples[i]...)
			}
			all := bytes.Repeat([]byte{0xA5}, len(want)+guard)
			if err := r.ReadBatch(indices, all, make([]uint64, len(indices))); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(all[:len(want)], want) || !bytes.Equal(all[len(want):], bytes.Repeat([]byte{0xA5}, guard)) {
				t.Fatal("the batch's bytes differ from the samples written, or bytes past it were written")
			}
		})
	}
}

// Batches past the budget copy the samples of admitted warm blocks from the mapping and
// read the rest with the engine, in one batch: every sample comes back whole and in its
// place, nothing is written past the batch, the mapped pages stay within the budget, and
// a damaged sample is refused whichever way it was read.
func TestBatchesPastTheBudget(t *testing.T) {
	const budget = 2 * warmBlock
	defer setMappedBudget(budget)()
	rng := rand.New(rand.NewPCG(5, 6))
	var samples [][]byte
	paths := make([]string, 2)
	for j, n := range []int{600, 300} { // 9.6 and 4.8 MiB: 8 blocks, 2 admitted
		part := make([][]byte, n)
		for i := range part {
			part[i] = make([]byte, 8<<10+rng.IntN(16<<10))
			for k := range part[i] {
				part[i][k] = byte(rng.Uint32())
			}
		}
		paths[j] = tempPath(t, fmt.Sprintf("%d.ffr", j))
		writeSamples(t, paths[j], part, WriterOptions{})
		samples = append(samples, part...)
	}
	r := openReader(t, ReaderOptions{CheckData: true}, paths...)
	if !r.window.streamData {
		t.Fatal("the data is not streamed past the budget")
	}
	readBatch := func(indices []int) error {
		const guard = 64
		total := 0
		for _, i := range indices {
			total += len(samples[i])
		}
		dst := bytes.Repeat([]byte{0xA5}, total+guard)
		sizes := make([]uint64, len(indices))
		wanted := make([]uint64, len(indices))
		for k, i := range indices {
			wanted[k] = uint64(i)
		}
		if err := r.ReadBatch(wanted, dst, sizes); err != nil {
			return err
		}
		out := 0
		for k, i := range indices {
			if n := len(samples[i]); sizes[k] != uint64(n) || !bytes.Equal(dst[out:out+n], samples[i]) {
				t.Fatalf("sample %d (place %d of the batch): size %d, bytes differ", i, k, sizes[k])
			}
			out += len(samples[i])
		}
		if !bytes.Equal(dst[total:], bytes.Repeat([]byte{0xA5}, guard)) {
			t.Fatal("bytes past the batch written")
		}
		return nil
	}

	rss := statusKiB(t, "RssFile")
	order := rng.Perm(len(samples))
	for start := 0; start < len(order); start += 37 {
		if err := readBatch(order[start:min(start+37, len(order))]); err != nil {
			t.Fatal(err)
		}
	}
	if mapped, want := r.warm.mapped.Load(), uint64(budget/warmBlock); mapped != want {
		t.Errorf("%d blocks mapped, want the budget's %d", mapped, want)
	}
	if grown := statusKiB(t, "RssFile") - rss; !raceEnabled && grown > (budget+faultAround)>>10 {
		t.Errorf("mapped file pages grew by %d KiB, want at most %d KiB", grown, (budget+faultAround)>>10)
	}

	// One sample in an admitted block and one outside, damaged on disk (the mapping shares
	// the page cache): a batch holding either is refused, naming it.
	admitted := func(i int) bool {
		it := batchItem{}
		fk, local, _ := r.locate(uint64(i))
		if err := r.plan(&it, r.files[fk], local, r.starts[fk]); err != nil {
			t.Fatal(err)
		}
		n := r.warm.starts[fk] + it.off/warmBlock
		return r.warm.admitted[n/64].Load()&(1<<(n%64)) != 0 && it.off/warmBlock == (it.end-1)/warmBlock
	}
	in := slices.IndexFunc(order, admitted)
	out := slices.IndexFunc(order, func(i int) bool { return !admitted(i) })
	damaged := []int{order[in], order[out]}
	clean := slices.DeleteFunc(slices.Clone(order[:40]), func(i int) bool { return slices.Contains(damaged, i) })
	for _, i := range damaged {
		fk, local, _ := r.locate(uint64(i))
		off, _, err := r.files[fk].span(local)
		if err != nil {
			t.Fatal(err)
		}
		flipBit(t, paths[fk], int64(off))
		batch := append(slices.Clone(clean), i)
		if err := readBatch(batch); !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), fmt.Sprint(i)) {
			t.Errorf("batch with damaged sample %d (admitted %v): err = %v", i, admitted(i), err)
		}
	}
}
