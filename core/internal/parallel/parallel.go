// Package parallel shares out the items of a batch among goroutines.
package parallel

import (
	"sync"
	"sync/atomic"
)

// Each calls do(i) for every i in [0, n) and returns the first error. The calling goroutine
// takes part; so do helper goroutines, one for each time tryHelper grants one (it is asked
// at most n-1 times, and its first false ends the asking), each calling release when it
// ends. Items are handed out one at a time, so a slow item does not hold up the rest; after
// an error no new item starts.
func Each(n int, tryHelper func() bool, release func(), do func(i int) error) error {
	var (
		next   atomic.Int64
		failed atomic.Bool
		once   sync.Once
		first  error
		wg     sync.WaitGroup
	)
	work := func() {
		for !failed.Load() {
			i := next.Add(1) - 1
			if i >= int64(n) {
				return
			}
			if err := do(int(i)); err != nil {
				once.Do(func() { first = err })
				failed.Store(true)
			}
		}
	}
	for h := 1; h < n && tryHelper(); h++ {
		wg.Add(1)
		go func() {
			defer func() { release(); wg.Done() }()
			work()
		}()
	}
	work()
	wg.Wait()
	return first
}

// UpTo is a tryHelper that grants at most k helpers, for a caller whose helpers need no
// other bound.
func UpTo(k int) func() bool {
	return func() bool {
		if k <= 0 {
			return false
		}
		k--
		return true
	}
}
