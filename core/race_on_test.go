//go:build race

package core

// raceEnabled: the race detector slows the 5M-sample memory test tenfold and adds
// nothing to it (one goroutine), so it runs only in normal builds.
const raceEnabled = true
