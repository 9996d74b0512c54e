package core

import (
	"fmt"
	"math/bits"
)

// Permutation is the shuffle order of one epoch: a keyed pseudo-random permutation of
// [0, n) that is never stored. A position maps to its sample index in O(1) time and memory,
// so a dataset of 10⁹ samples needs no permutation array, and resuming at batch k costs
// what starting at batch 0 does. The order is a pure function of (n, seed, epoch): loader
// states record those three, and every release must map them to the same order.
//
// It is an (unbalanced) Feistel network over the smallest power of two that holds n (at
// least 4), a bijection there, restricted to [0, n) by cycle walking: a value that lands
// outside is encrypted again until it lands inside. The domain being less than 2n, fewer
// than 2 encryptions are needed per position on average. Each round mixes one half, keyed,
// with the SplitMix64 finaliser; the round keys are SplitMix64 steps from the seed and the
// epoch. Six rounds mix well once each half has a few bits; tiny domains get twelve (pairs
// of positions of a 7-sample dataset were visibly biased with six).
type Permutation struct {
	n                   uint64
	leftBits, rightBits uint
	keys                []uint64
}

const (
	permutationRounds     = 6
	permutationRoundsTiny = 12
	permutationTinyBits   = 6
	// The SplitMix64 constants: its increment and its finaliser's multipliers.
	splitMixGolden = 0x9E3779B97F4A7C15
	splitMixMul1   = 0xBF58476D1CE4E5B9
	splitMixMul2   = 0x94D049BB133111EB
)

// maxPermuted is the largest n of a Permutation: its positions and indices are int64, as
// every index array of the library's callers.
const maxPermuted = 1 << 63

// NewPermutation returns the permutation of [0, n) keyed by seed and epoch; an n above
// 2⁶³ wraps ErrInvalid.
func NewPermutation(n, seed, epoch uint64) (*Permutation, error) {
	if n > maxPermuted {
		return nil, fmt.Errorf("%w: a permutation of %d positions (at most 2^63)", ErrInvalid, n)
	}
	width := uint(max(2, bits.Len64(n-1)))
	if n == 0 {
		width = 2
	}
	rounds := permutationRounds
	if width < permutationTinyBits {
		rounds = permutationRoundsTiny
	}
	p := &Permutation{n: n, leftBits: width / 2, rightBits: width - width/2, keys: make([]uint64, rounds)}
	key := splitMix64(splitMix64(seed) ^ epoch)
	for k := range p.keys {
		key = splitMix64(key)
		p.keys[k] = key
	}
	return p, nil
}

// splitMix64 is one step of SplitMix64 from state x: its increment, then its finaliser.
func splitMix64(x uint64) uint64 {
	z := x + splitMixGolden
	z = (z ^ z>>30) * splitMixMul1
	z = (z ^ z>>27) * splitMixMul2
	return z ^ z>>31
}

// Map sets out[k] to the sample index at position positions[k]; a position outside [0, n)
// wraps ErrIndex, with out left unfinished.
func (p *Permutation) Map(positions, out []int64) error {
	if len(out) < len(positions) {
		return fmt.Errorf("%w: %d outputs for %d positions", ErrInvalid, len(out), len(positions))
	}
	for k, position := range positions {
		if position < 0 || uint64(position) >= p.n {
			return fmt.Errorf("%w: position %d of a permutation of [0, %d)", ErrIndex, position, p.n)
		}
		v := p.encrypt(uint64(position))
		for v >= p.n {
			v = p.encrypt(v)
		}
		out[k] = int64(v)
	}
	return nil
}

func (p *Permutation) encrypt(x uint64) uint64 {
	leftBits, rightBits := p.leftBits, p.rightBits
	left, right := x>>rightBits, x&(1<<rightBits-1)
	for _, key := range p.keys {
		z := (right ^ key) * splitMixMul1
		z ^= z >> 31
		z *= splitMixMul2
		left, right = right, left^z>>(64-leftBits)
		leftBits, rightBits = rightBits, leftBits
	}
	return left<<rightBits | right
}
