package core

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
)

// Column is the layout of a column file (see "Column blocks" in the package documentation):
// Values values of Width bytes each, stored PerBlock to a sample in value order, the last
// sample holding the rest. A reader of a column file is told its layout by whoever knows it
// (a structured dataset's spec.json); the file itself is a plain file of the base format.
type Column struct {
	Values, Width, PerBlock uint64
}

// maxBlockBytes bounds a block: a value read alone reads its whole block, so a layout
// whose blocks are larger than any sensible one is refused, not allocated.
const maxBlockBytes = 1 << 30

// Blocks is the number of samples the layout takes: Values / PerBlock rounded up.
func (c Column) Blocks() uint64 {
	if c.PerBlock == 0 {
		return 0
	}
	return c.Values/c.PerBlock + min(1, c.Values%c.PerBlock)
}

// blockBytes is the size of block b as the layout has it.
func (c Column) blockBytes(b uint64) uint64 {
	return min(c.PerBlock, c.Values-b*c.PerBlock) * c.Width
}

// check refuses a layout that cannot describe a file of samples blocks.
func (c Column) check(samples uint64) error {
	switch {
	case c.Width == 0 || c.PerBlock == 0:
		return fmt.Errorf("%w: a column of %d-byte values, %d to a block: both must be at least 1",
			ErrInvalid, c.Width, c.PerBlock)
	case c.Width > maxBlockBytes || c.PerBlock > maxBlockBytes/c.Width:
		return fmt.Errorf("%w: a column block of %d values of %d bytes is over %d bytes",
			ErrInvalid, c.PerBlock, c.Width, maxBlockBytes)
	case c.Blocks() != samples:
		return fmt.Errorf("%w: a column of %d values, %d to a block, takes %d blocks; the file holds %d samples",
			ErrCorrupt, c.Values, c.PerBlock, c.Blocks(), samples)
	}
	return nil
}

// blockError names, in an error about a sample of a column file, the values that sample
// holds: "(column block 3: values 3072 to 4095)".
func (c Column) blockError(err error) error {
	var fe *fileError
	if !errors.As(err, &fe) || fe.index < 0 {
		return err
	}
	b := uint64(fe.index)
	first := b * c.PerBlock
	last := min(first+c.PerBlock, c.Values) - 1
	return fmt.Errorf("%w (column block %d: values %d to %d)", err, b, first, last)
}

// columnScratch holds the blocks of one ReadValues call that are not read from a mapping
// (cold, remote or compressed), recycled across calls.
type columnScratch struct {
	blocks []uint64
	data   []byte
}

// maxPooledScratch bounds what an idle pooled scratch keeps allocated.
const maxPooledScratch = 8 << 20

var columnScratches = sync.Pool{New: func() any { return new(columnScratch) }}

// ReadValues gathers the values indices[0..n) of a column file (duplicates and any order
// allowed) back to back into dst, Width bytes each. Each block that holds one of them is
// read once and, when the reader checks data, checked whole against its CRC-32; a block of
// another size than the layout gives is ErrCorrupt. Errors about a block name the values
// it holds. An index at or past Values wraps ErrIndex, a dst shorter than n*Width wraps
// io.ErrShortBuffer; either way nothing is read.
func (r *Reader) ReadValues(c Column, indices []uint64, dst []byte) error {
	if err := c.check(r.Len()); err != nil {
		return err
	}
	need := uint64(len(indices)) * c.Width
	if need/c.Width != uint64(len(indices)) || need > uint64(len(dst)) {
		return fmt.Errorf("%w: %w: %d values of %d bytes need %d bytes, the buffer has %d",
			io.ErrShortBuffer, ErrInvalid, len(indices), c.Width, need, len(dst))
	}
	s := columnScratches.Get().(*columnScratch)
	defer putScratch(s)
	blocks := s.blocks[:0]
	for _, i := range indices {
		if i >= c.Values {
			return fmt.Errorf("%w: value %d of a column of %d", ErrIndex, i, c.Values)
		}
		blocks = append(blocks, i/c.PerBlock)
	}
	if !slices.IsSorted(blocks) {
		slices.Sort(blocks)
	}
	blocks = slices.Compact(blocks)
	s.blocks = blocks
	// The indices each block serves, grouped by block: served[starts[j]:starts[j+1]].
	starts := make([]int, len(blocks)+1)
	owner := make([]int, len(indices))
	for k, i := range indices {
		owner[k], _ = slices.BinarySearch(blocks, i/c.PerBlock)
		starts[owner[k]+1]++
	}
	for j := range blocks {
		starts[j+1] += starts[j]
	}
	served := make([]int, len(indices))
	next := slices.Clone(starts[:len(blocks)])
	for k, j := range owner {
		served[next[j]] = k
		next[j]++
	}
	return c.blockError(r.readBlocks(c, blocks, s, func(j int, block []byte) {
		first := blocks[j] * c.PerBlock
		for _, k := range served[starts[j]:starts[j+1]] {
			at := (indices[k] - first) * c.Width
			copy(dst[uint64(k)*c.Width:], block[at:at+c.Width])
		}
	}))
}

// ReadValueRange reads values [start, start+count) of a column file into dst, Width bytes
// each: the blocks it covers whole straight into dst by one batch read, the partial first
// and last ones through a scratch buffer. Checks and errors as ReadValues.
func (r *Reader) ReadValueRange(c Column, start, count uint64, dst []byte) error {
	if err := c.check(r.Len()); err != nil {
		return err
	}
	if start > c.Values || count > c.Values-start {
		return fmt.Errorf("%w: values [%d, %d) of a column of %d", ErrIndex, start, start+count, c.Values)
	}
	need := count * c.Width
	if need > uint64(len(dst)) {
		return fmt.Errorf("%w: %w: %d values of %d bytes need %d bytes, the buffer has %d",
			io.ErrShortBuffer, ErrInvalid, count, c.Width, need, len(dst))
	}
	if count == 0 {
		return nil
	}
	end := start + count
	// Whole blocks [inner, outer): those the range covers from their first value to their last.
	inner := (start + c.PerBlock - 1) / c.PerBlock
	outer := end / c.PerBlock
	if end == c.Values {
		outer = c.Blocks()
	}
	if inner >= outer { // within one block, or two partial ones
		return c.blockError(r.readPartial(c, start, end, dst))
	}
	head, tail := inner*c.PerBlock, min(outer*c.PerBlock, c.Values)
	if err := r.readPartial(c, start, head, dst); err != nil {
		return c.blockError(err)
	}
	if err := r.readWholeBlocks(c, inner, outer, dst[(head-start)*c.Width:(tail-start)*c.Width]); err != nil {
		return c.blockError(err)
	}
	return c.blockError(r.readPartial(c, tail, end, dst[(tail-start)*c.Width:]))
}

// readPartial reads values [from, to) (at most two blocks' worth, none of them whole)
// into dst through readBlocks.
func (r *Reader) readPartial(c Column, from, to uint64, dst []byte) error {
	if from == to {
		return nil
	}
	s := columnScratches.Get().(*columnScratch)
	defer putScratch(s)
	s.blocks = append(s.blocks[:0], from/c.PerBlock)
	if last := (to - 1) / c.PerBlock; last != s.blocks[0] {
		s.blocks = append(s.blocks, last)
	}
	return r.readBlocks(c, s.blocks, s, func(j int, block []byte) {
		first := s.blocks[j] * c.PerBlock
		lo, hi := max(from, first), min(to, first+c.PerBlock)
		copy(dst[(lo-from)*c.Width:], block[(lo-first)*c.Width:(hi-first)*c.Width])
	})
}

// readWholeBlocks reads blocks [from, to) back to back into dst, which is exactly their
// size by the layout, once each block's size is checked against it: as one span (ReadSpan:
// a local file's blocks by one system call, no page of its mapping touched, which in a
// fresh process costs a fault per page).
func (r *Reader) readWholeBlocks(c Column, from, to uint64, dst []byte) error {
	indices := make([]uint64, to-from)
	for k := range indices {
		indices[k] = from + uint64(k)
	}
	sizes := make([]uint64, len(indices))
	if err := r.Sizes(indices, sizes); err != nil {
		return err
	}
	for k, size := range sizes {
		if err := c.checkBlock(r, indices[k], size); err != nil {
			return err
		}
	}
	return r.ReadSpan(from, to-from, dst, make([]uint64, to-from+1))
}

// checkBlock compares the size of block b with the layout's.
func (c Column) checkBlock(r *Reader, b, size uint64) error {
	if want := c.blockBytes(b); size != want {
		fk, local, _ := r.locate(b)
		return errorf(r.files[fk].path, int64(local), ErrCorrupt,
			"a column block of %d bytes, where the layout (%d values of %d bytes, %d to a block) has %d",
			size, c.Values, c.Width, c.PerBlock, want)
	}
	return nil
}

// readBlocks reads the distinct blocks (ascending) of a column file, checks each one's
// size and, with CheckData, its CRC-32, and hands each one's bytes to use (in order, under
// the fault guard): from the file's mapping when warm and raw, else from s.data.
func (r *Reader) readBlocks(c Column, blocks []uint64, s *columnScratch, use func(j int, block []byte)) error {
	if err := r.acquire(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	b := getBatch(len(blocks))
	defer putBatch(b)
	var cur *batchItem
	return withFaultGuard(faultAt(&cur, r.files[0].path), func() error {
		var total uint64
		for j, block := range blocks {
			it := &b.items[j]
			cur = it
			fk, local, err := r.locate(block)
			if err != nil {
				return err
			}
			if err := r.plan(it, r.files[fk], local, r.starts[fk]); err != nil {
				return err
			}
			if err := c.checkBlock(r, block, it.size); err != nil {
				return err
			}
			it.out = total
			total += it.size
		}
		if uint64(cap(s.data)) < total {
			s.data = make([]byte, total)
		}
		scratch := s.data[:total]
		if err := r.fetch(b, scratch); err != nil {
			return err
		}
		for j := range b.items {
			it := &b.items[j]
			cur = it
			block := it.src
			if it.inPlace() {
				if err := r.checkSample(it, block); err != nil {
					return err
				}
			} else {
				block = scratch[it.out : it.out+it.size]
				if err := r.deliver(it, block); err != nil {
					return err
				}
			}
			use(j, block)
		}
		return nil
	})
}

func putScratch(s *columnScratch) {
	if cap(s.data) > maxPooledScratch || cap(s.blocks) > maxPooledItems {
		return
	}
	columnScratches.Put(s)
}
