package parallel

import (
	"errors"
	"sync/atomic"
	"testing"
)

func TestEachCallsEveryItemOnce(t *testing.T) {
	for _, n := range []int{0, 1, 2, 63, 1000} {
		for _, helpers := range []int{0, 1, 7} {
			seen := make([]atomic.Int32, n)
			var released atomic.Int32
			granted := UpTo(helpers)
			var asked int32
			err := Each(n, func() bool {
				ok := granted()
				if ok {
					asked++
				}
				return ok
			}, func() { released.Add(1) }, func(i int) error {
				seen[i].Add(1)
				return nil
			})
			if err != nil {
				t.Fatalf("n=%d helpers=%d: %v", n, helpers, err)
			}
			for i := range seen {
				if c := seen[i].Load(); c != 1 {
					t.Fatalf("n=%d helpers=%d: item %d done %d times", n, helpers, i, c)
				}
			}
			if want := min(helpers, max(n-1, 0)); asked != int32(want) || released.Load() != int32(want) {
				t.Fatalf("n=%d helpers=%d: %d granted, %d released, want %d", n, helpers, asked, released.Load(), want)
			}
		}
	}
}

func TestEachStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	var done atomic.Int32
	err := Each(1000, UpTo(0), func() {}, func(i int) error {
		done.Add(1)
		if i == 10 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if d := done.Load(); d != 11 {
		t.Fatalf("%d items done after the error at item 10 on one goroutine, want 11", d)
	}
}
