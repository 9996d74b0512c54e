package source

import "sync/atomic"

// Stats count what a reader's sources did: requests to the store and their bytes, retries,
// and the chunk cache's hits, misses and evictions. One Stats is shared by the sources of a
// reader; every field is safe for concurrent use.
type Stats struct {
	Requests   atomic.Int64 // requests sent to the store (HEAD and GET, retries included)
	Bytes      atomic.Int64 // body bytes received
	Retries    atomic.Int64 // requests that were retries of a failed one
	Hits       atomic.Int64 // chunk reads served from the cache
	Misses     atomic.Int64 // chunk reads that had to download the chunk
	Evictions  atomic.Int64 // chunks this reader's processes evicted to make room
	Bypassed   atomic.Int64 // chunks read without caching (no room: every chunk in use)
	Prefetched atomic.Int64 // chunks downloaded ahead on a hint
}

// Request counts one request (remote.Observer).
func (s *Stats) Request(retry bool) {
	s.Requests.Add(1)
	if retry {
		s.Retries.Add(1)
	}
}

// Received counts body bytes (remote.Observer).
func (s *Stats) Received(bytes int64) { s.Bytes.Add(bytes) }

// Snapshot is the counters' values, in the order of StatNames.
func (s *Stats) Snapshot() []int64 {
	return []int64{s.Requests.Load(), s.Bytes.Load(), s.Retries.Load(), s.Hits.Load(),
		s.Misses.Load(), s.Evictions.Load(), s.Bypassed.Load(), s.Prefetched.Load()}
}

// StatNames name the values of Snapshot (the C ABI's order, capi/ffrecord.h).
var StatNames = []string{"requests", "bytes_fetched", "retries", "cache_hits",
	"cache_misses", "evictions", "bypassed", "prefetched"}
