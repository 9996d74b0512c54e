package core

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A lone sample is read apart from the batch machinery (no residency probe, no engine
// queue), through the mapping or, for data not read through the mappings, with one system
// call: both ways give the sample's bytes, and with checks on a damaged one is refused.
func TestLoneSampleReads(t *testing.T) {
	for _, budget := range []uint64{mappedBudget, 1} {
		t.Run(fmt.Sprintf("budget=%d", budget), func(t *testing.T) {
			defer setMappedBudget(budget)()
			path := damagedFile(t, "one.ffr", 20, 3000, 7)
			for _, check := range []bool{true, false} {
				r := openReader(t, ReaderOptions{CheckData: check}, path)
				if r.window.streamData != (budget == 1) {
					t.Fatalf("streamData = %v with a budget of %d", r.window.streamData, budget)
				}
				dst, sizes := make([]byte, 4000), make([]uint64, 1)
				for i := range uint64(20) {
					err := r.ReadBatch([]uint64{i}, dst, sizes)
					if i == 7 {
						if check != errors.Is(err, ErrChecksum) {
							t.Fatalf("check=%v, damaged sample: err = %v", check, err)
						}
						continue
					}
					want := []byte(strings.Repeat(fmt.Sprint(i%10), 3000))
					if err != nil || sizes[0] != 3000 || !bytes.Equal(dst[:3000], want) {
						t.Fatalf("check=%v, sample %d: err %v, size %d", check, i, err, sizes[0])
					}
				}
				if err := r.ReadBatch([]uint64{1}, dst[:2999], sizes); !errors.Is(err, ErrInvalid) {
					t.Fatalf("a buffer one byte short: err = %v, want ErrInvalid", err)
				}
			}
		})
	}
}
