package abi

import (
	"sync"
	"testing"
)

func TestTableHandles(t *testing.T) {
	readersT := newTable[string]("reader", 1)
	writersT := newTable[string]("writer", 0)
	r1, r2 := readersT.add("a"), readersT.add("b")
	w1 := writersT.add("c")
	if r1 <= 0 || r2 <= 0 || w1 <= 0 || r1 == r2 || r1&1 != 1 || w1&1 != 0 {
		t.Fatalf("handles %d %d %d: want distinct, positive, readers odd, writers even", r1, r2, w1)
	}
	if v, err := readersT.get("f", r2); err != nil || v != "b" {
		t.Fatalf("get(%d) = %q, %v", r2, v, err)
	}
	if v, err := readersT.remove("f", r1); err != nil || v != "a" {
		t.Fatalf("remove(%d) = %q, %v", r1, v, err)
	}
	if readersT.len() != 1 {
		t.Fatalf("len %d after one remove, want 1", readersT.len())
	}
	tests := []struct {
		name   string
		handle int64
		want   int32
	}{
		{"closed", r1, StatusClosed},
		{"writer handle given as reader", w1, StatusHandle},
		{"zero", 0, StatusHandle},
		{"negative", -r2, StatusHandle},
		{"not issued yet", r2 + 2, StatusHandle},
		{"below the first issued", r1 - 2, StatusHandle},
	}
	for _, tt := range tests {
		if _, err := readersT.get("f", tt.handle); statusOf(err) != tt.want {
			t.Errorf("%s: get(%d) gave %v, want status %d", tt.name, tt.handle, err, tt.want)
		}
		if _, err := readersT.remove("f", tt.handle); statusOf(err) != tt.want {
			t.Errorf("%s: remove(%d) gave %v, want status %d", tt.name, tt.handle, err, tt.want)
		}
	}
}

// TestTablesStartApart checks that two copies of the library (two tables) hand out
// different handles, so one copy's handle is not valid in the other.
func TestTablesStartApart(t *testing.T) {
	same := 0
	for range 20 {
		if newTable[int]("reader", 1).add(0) == newTable[int]("reader", 1).add(0) {
			same++
		}
	}
	if same > 1 {
		t.Errorf("%d of 20 pairs of fresh tables issued the same first handle", same)
	}
}

func TestTableConcurrent(t *testing.T) {
	tab := newTable[int]("reader", 1)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				h := tab.add(g*1000 + i)
				if v, err := tab.get("f", h); err != nil || v != g*1000+i {
					t.Errorf("get(%d) = %d, %v", h, v, err)
					return
				}
				if _, err := tab.remove("f", h); err != nil {
					t.Errorf("remove(%d): %v", h, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if tab.len() != 0 {
		t.Errorf("%d handles left", tab.len())
	}
}
