package core

import (
	"errors"
	"slices"
	"testing"
)

// The orders of earlier releases (the numpy implementation that this one replaced wrote
// these): a loader state records (n, seed, epoch) and must resume in the same order.
func TestPermutationKeepsEarlierOrders(t *testing.T) {
	for _, c := range []struct {
		n, seed, epoch  uint64
		positions, want []int64
	}{
		{1, 0, 0, []int64{0}, []int64{0}},
		{2, 5, 1, []int64{0, 1}, []int64{1, 0}},
		{7, 3, 2, []int64{0, 1, 3, 4, 6}, []int64{5, 2, 3, 4, 0}},
		{32, 11, 0, []int64{0, 1, 5, 16, 18, 27, 28, 31}, []int64{0, 21, 23, 2, 17, 3, 5, 26}},
		{33, 11, 0, []int64{0, 1, 12, 14, 16, 18, 29, 32}, []int64{15, 24, 32, 27, 29, 9, 17, 25}},
		{64, 1, 7, []int64{0, 1, 32, 33, 55, 60, 63}, []int64{24, 63, 43, 47, 10, 48, 59}},
		{1000, 1, 0, []int64{0, 1, 269, 500, 511, 636, 850, 999}, []int64{740, 471, 153, 935, 588, 680, 479, 235}},
		{48000, 0, 0, []int64{0, 1, 12949, 24000, 24534, 30574, 40829, 47999}, []int64{42071, 39322, 41794, 24194, 3593, 28421, 7575, 37918}},
		{1000000000, 0, 3, []int64{0, 1, 269786713, 500000000, 511136479, 636961687, 850624225, 999999999}, []int64{563692895, 697791843, 163142786, 593800834, 899010208, 229297375, 992079358, 258640654}},
		{1000000000000, 9, 4, []int64{0, 1, 16527635528, 40973523936, 269786713763, 500000000000, 636961687321, 999999999999}, []int64{630629353241, 669226738222, 43363281171, 434478317861, 775049529346, 47330887727, 545027798114, 642485383771}},
		{4611686018427387911, 123, 5, []int64{0, 1, 1044137479047788652, 2305843009213693955, 2458517128650238621, 2474278558706798446, 3035548706028950581, 4611686018427387910}, []int64{2624362877012532566, 1848571323165634815, 4227493971156256296, 2156681159516069427, 3500080717040572826, 581728369812455846, 3146002162665585272, 3686336281017672151}},
		{9223372036854775807, 18446744073709551615, 18446744073709551614, []int64{0, 1, 3964008365869430753, 4611686018427387903, 6453260761578832154, 7316989213811411178, 7906940211591853280, 9223372036854775806}, []int64{2474111427057283485, 982298542681682918, 7608779110897578787, 9118912896944417363, 4744858372330479361, 7363250393038489983, 8120100108204139641, 520728570023612382}},
	} {
		got := make([]int64, len(c.positions))
		if err := mustPermutation(t, c.n, c.seed, c.epoch).Map(c.positions, got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("n=%d seed=%d epoch=%d: %v, earlier releases gave %v", c.n, c.seed, c.epoch, got, c.want)
		}
	}
}

// Every size from the smallest to past the twelve-round bound, and around powers of two, is
// a bijection of [0, n).
func TestPermutationIsABijection(t *testing.T) {
	sizes := []uint64{1, 2, 3, 4, 5, 31, 32, 33, 63, 64, 65, 1000, 4095, 4096, 4097}
	for _, n := range sizes {
		for seed := range uint64(3) {
			positions := make([]int64, n)
			for k := range positions {
				positions[k] = int64(k)
			}
			out := make([]int64, n)
			if err := mustPermutation(t, n, seed, seed+1).Map(positions, out); err != nil {
				t.Fatal(err)
			}
			slices.Sort(out)
			if !slices.Equal(out, positions) {
				t.Fatalf("n=%d seed=%d: not a permutation of [0, n)", n, seed)
			}
		}
	}
}

func TestPermutationRefusesWhatItCannotMap(t *testing.T) {
	p := mustPermutation(t, 10, 1, 0)
	for _, position := range []int64{10, -1} {
		if err := p.Map([]int64{3, position}, make([]int64, 2)); !errors.Is(err, ErrIndex) {
			t.Fatalf("position %d: err = %v, want ErrIndex", position, err)
		}
	}
	if err := p.Map([]int64{3, 4}, make([]int64, 1)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("too few outputs: err = %v, want ErrInvalid", err)
	}
	if err := mustPermutation(t, 0, 1, 0).Map(nil, nil); err != nil {
		t.Fatalf("an empty permutation: %v", err)
	}
	if _, err := NewPermutation(maxPermuted+1, 0, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("n above 2^63: err = %v, want ErrInvalid", err)
	}
}

func mustPermutation(t *testing.T, n, seed, epoch uint64) *Permutation {
	t.Helper()
	p, err := NewPermutation(n, seed, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
