package core

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// UnknownCount as Create's n means the number of samples is not known in advance, nor
// therefore where the data begins. A first bulk write is placed as if it were the last,
// smaller writes are kept in memory up to a bound; data placed wrong is copied behind the
// header at Close, which costs one extra pass over it on disk (in-kernel with
// copy_file_range) and, until Close returns, disk space for two copies. See
// writer_staging.go.
const UnknownCount = ^uint64(0)

const (
	// writeBuffer is how much sample data is gathered before one write system call.
	writeBuffer = 4 << 20
	// directWriteMin is the sample size from which samples skip the buffer.
	directWriteMin = writeBuffer / 4
	// vectorWriteMin is the sample size from which the samples of a batch go to the file
	// straight from the caller's memory, several in one system call: copying them into the
	// buffer first would cost a pass over them that writes of that size no longer repay.
	vectorWriteMin = 64 << 10
)

// WriterOptions tune a Writer.
type WriterOptions struct {
	Compression Compression
}

// Writer writes one FFRecord file. Samples stream to a temporary file beside the final
// path (with UnknownCount, a bounded amount of them stays in memory first); only their
// offsets and checksums (12 bytes each, 21 with LZ4: original size and compression too)
// and two 4 MiB write buffers stay in memory. The final path
// appears, complete, only when Close succeeds. A Writer is safe for concurrent use:
// samples are stored in the order the calls happen, a batch's together.
type Writer struct {
	mu     sync.Mutex
	path   string
	tmp    *os.File
	n      uint64 // declared sample count, or UnknownCount
	count  uint64
	dataAt uint64 // file offset of the first sample in tmp; with stage, not yet known
	pos    uint64 // bytes of sample data written or buffered so far
	buf    []byte // sample data not yet written; it starts at data offset pos-len(buf)
	spare  []byte // the other buffer: being written by inflight, or free
	// inflight receives the result of the one buffer write running in the background, so
	// that the kernel's copy into the page cache (half the cost of writing small samples)
	// overlaps with gathering the next buffer; nil when none runs.
	inflight chan error
	crcs     []uint32
	offsets  []uint64 // relative to the first sample
	// stage holds the data of an UnknownCount writer until it is placed in the file; nil
	// with a known count.
	stage    *memoryStage
	comp     *compressor
	done     bool
	err      error // a failed write: the file is lost, every later call reports it
	closeErr error // the first Close's result, which later calls return again

	volatile bool // SetDurable(false): no writeback, no fsync at Close

	writtenBack uint64 // file offset up to which writeback has been started
	// writeback receives the end of the one writeback request running in the background;
	// nil when none runs.
	writeback chan struct{}
}

// Create starts writing a file of exactly n samples (or UnknownCount) at path.
func Create(path string, n uint64, opts WriterOptions) (*Writer, error) {
	switch opts.Compression {
	case CompressNone, CompressLZ4, CompressZstd:
	default:
		return nil, fmt.Errorf("%w: %s: unknown compression %v", ErrInvalid, path, opts.Compression)
	}
	w := &Writer{path: path, n: n, buf: make([]byte, 0, writeBuffer), spare: make([]byte, 0, writeBuffer)}
	switch opts.Compression {
	case CompressLZ4:
		w.comp = &compressor{compression: compressionLZ4}
	case CompressZstd:
		w.comp = &compressor{compression: compressionZstd}
	}
	if n != UnknownCount {
		size, ok := headerSize(w.storedCount(n))
		if !ok || (w.comp != nil && n > maxExtSamples) {
			return nil, fmt.Errorf("%w: %s: %d samples do not fit the format", ErrInvalid, path, n)
		}
		w.dataAt = size
		prealloc := min(n, 1<<16)
		w.crcs, w.offsets = make([]uint32, 0, prealloc), make([]uint64, 0, prealloc)
	} else {
		w.stage = &memoryStage{}
	}
	if err := checkTarget(path); err != nil {
		return nil, err
	}
	tmp, err := createTemp(path)
	if err != nil {
		return nil, err
	}
	w.tmp = tmp
	return w, nil
}

// checkTarget refuses at once a path that Close could never rename the file to: one that
// holds a NUL byte, names a directory, or ends with a slash.
func checkTarget(path string) error {
	if err := checkPath(path); err != nil {
		return err
	}
	info, err := os.Lstat(path)
	if _, base := filepath.Split(path); base == "" || (err == nil && info.IsDir()) {
		return &fileError{path: path, index: -1, err: fmt.Errorf("%w: %w", ErrInvalid, unix.EISDIR)}
	}
	return nil
}

// createTemp makes a new file beside path whose name never matches *.ffr. Its errors name
// path, not the temporary name the user never chose (a missing directory, say).
func createTemp(path string) (*os.File, error) {
	dir, base := filepath.Split(path)
	for range 100 {
		name := filepath.Join(dir, fmt.Sprintf(".%s.tmp-%016x", base, rand.Uint64()))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			return f, nil
		}
		if !os.IsExist(err) {
			return nil, &fs.PathError{Op: "create", Path: path, Err: errors.Unwrap(err)}
		}
	}
	return nil, fmt.Errorf("%s: no free temporary name", path)
}

// WriteOne appends one sample.
func (w *Writer) WriteOne(p []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.accepts(1); err != nil {
		return err
	}
	if err := w.placeFirst(1, len(p)); err != nil {
		return err
	}
	return w.appendSample(p)
}

// WriteBatch appends len(sizes) samples stored back to back in data, sizes[k] bytes each,
// as consecutive samples: no sample written by another goroutine lands between them. A
// batch that can be refused up front (sizes that do not add up to len(data), more samples
// than the room left below the declared count, a closed or failed writer) is refused
// whole, before any of it is written. An I/O error while writing it loses the file, as in
// WriteOne.
func (w *Writer) WriteBatch(data []byte, sizes []uint64) error {
	total := uint64(0)
	for _, size := range sizes {
		if size > uint64(len(data))-total {
			return fmt.Errorf("%w: %s: the sizes of a batch of %d samples add up to more than its %d bytes of data",
				ErrInvalid, w.path, len(sizes), len(data))
		}
		total += size
	}
	if total != uint64(len(data)) {
		return fmt.Errorf("%w: %s: the sizes of a batch of %d samples add up to %d bytes, its data has %d",
			ErrInvalid, w.path, len(sizes), total, len(data))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.accepts(uint64(len(sizes))); err != nil {
		return err
	}
	if err := w.placeFirst(uint64(len(sizes)), len(data)); err != nil {
		return err
	}
	if w.comp == nil {
		return w.appendRun(data, sizes)
	}
	samples := make([][]byte, len(sizes))
	for k, size := range sizes {
		samples[k], data = data[:size:size], data[size:]
	}
	return w.appendSamples(samples)
}

// appendRun appends uncompressed samples stored back to back in data, sizes[k] bytes each:
// stored as they are, they are one run of the data area, written as one piece (straight
// from data when large, see appendData) while their CRCs are computed on other cores. A
// batch of many small samples (a column of short strings) then costs its copy and its
// CRCs, not a call per sample; w.mu is held.
func (w *Writer) appendRun(data []byte, sizes []uint64) error {
	first := len(w.crcs)
	w.crcs = slices.Grow(w.crcs, len(sizes))[:first+len(sizes)]
	w.offsets = slices.Grow(w.offsets, len(sizes))
	for _, size := range sizes {
		w.offsets = append(w.offsets, w.pos)
		w.pos += size
	}
	w.pos -= uint64(len(data)) // appendData advances it again
	run := runSums{data: data, starts: w.offsets[first:], base: w.pos, sums: w.crcs[first:]}
	parts := min(runtime.GOMAXPROCS(0), len(sizes))
	if len(sizes) < parallelChecks && len(data) < parallelBytes {
		parts = 1
	}
	var wg sync.WaitGroup
	for j := 1; j < parts; j++ {
		wg.Go(func() { run.compute(j*len(sizes)/parts, (j+1)*len(sizes)/parts) })
	}
	w.count += uint64(len(sizes))
	w.err = w.appendData(data)
	run.compute(0, len(sizes)/parts)
	wg.Wait()
	return w.err
}

// runSums computes the CRC-32s of a run of samples stored back to back: sample k begins
// at starts[k] - base in data and ends where the next begins (the last, at its end).
type runSums struct {
	data   []byte
	starts []uint64
	base   uint64
	sums   []uint32
}

func (r runSums) compute(from, to int) {
	for k := from; k < to; k++ {
		end := uint64(len(r.data))
		if k+1 < len(r.starts) {
			end = r.starts[k+1] - r.base
		}
		r.sums[k] = checksumIEEE(r.data[r.starts[k]-r.base : end])
	}
}

// WriteVectors appends samples as consecutive samples, each from its own memory, as
// WriteBatch does for samples stored back to back: refused whole when it can be refused up
// front, the file lost on an I/O error. Large samples are written to the file from where
// they are, several in one system call, without a copy.
func (w *Writer) WriteVectors(samples [][]byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.accepts(uint64(len(samples))); err != nil {
		return err
	}
	size := 0
	for _, p := range samples {
		size += len(p)
	}
	if err := w.placeFirst(uint64(len(samples)), size); err != nil {
		return err
	}
	return w.appendSamples(samples)
}

// appendSamples appends samples the writer has room for; w.mu is held. Runs of large
// raw samples go to the file in one vectored write.
func (w *Writer) appendSamples(samples [][]byte) error {
	for k := 0; k < len(samples); {
		if w.comp != nil || w.stage != nil || len(samples[k]) < vectorWriteMin {
			if err := w.appendSample(samples[k]); err != nil {
				return err
			}
			k++
			continue
		}
		end := k + 1
		for end < len(samples) && end-k < maxWriteVectors && len(samples[end]) >= vectorWriteMin {
			end++
		}
		w.err = w.appendDirect(samples[k:end])
		if w.err != nil {
			return w.err
		}
		k = end
	}
	return nil
}

// maxWriteVectors bounds the samples of one vectored write (Linux takes up to 1024).
const maxWriteVectors = 256

// appendDirect writes raw samples, each at least vectorWriteMin bytes, straight from their
// memory after the data buffered so far, and records them; w.mu is held.
func (w *Writer) appendDirect(run [][]byte) error {
	if err := w.flush(); err != nil {
		return err
	}
	at, first := w.dataAt+w.pos, len(w.crcs)
	for _, p := range run {
		w.crcs = append(w.crcs, 0)
		w.offsets = append(w.offsets, w.pos)
		w.count++
		w.pos += uint64(len(p))
	}
	sums := w.crcs[first:]
	checksums := func() {
		for k, p := range run {
			sums[k] = checksumIEEE(p)
		}
	}
	if w.dataAt+w.pos-at < overlapWriteMin {
		checksums()
		if err := w.writeVectors(run, at); err != nil {
			return err
		}
	} else if err := w.writeOverlapped(run, at, checksums); err != nil {
		return err
	}
	w.startWriteback(w.dataAt + w.pos)
	return nil
}

// overlapWriteMin is the size of a vectored write from which the samples' checksums are
// computed on another goroutine while the write runs: the two passes over the data then
// take two cores (starting the goroutine costs ~20 µs, computing the checksums of 256 KiB).
const overlapWriteMin = 256 << 10

// writeOverlapped writes bufs from file offset off while checksums runs on another core.
func (w *Writer) writeOverlapped(bufs [][]byte, off uint64, checksums func()) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		checksums()
	}()
	err := w.writeVectors(slices.Clone(bufs), off) // it trims its slices: checksums reads bufs
	<-done
	return err
}

// writeVectors writes the buffers one after the other from file offset off, resuming
// after short writes.
func (w *Writer) writeVectors(bufs [][]byte, off uint64) error {
	fd := int(w.tmp.Fd())
	for len(bufs) > 0 {
		n, err := unix.Pwritev(fd, bufs, int64(off))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", w.path, &fs.PathError{Op: "write", Path: w.tmp.Name(), Err: err})
		}
		if n == 0 {
			return fmt.Errorf("%s: write made no progress: %w", w.path, io.ErrShortWrite)
		}
		off += uint64(n)
		for n > 0 {
			if n < len(bufs[0]) {
				bufs[0] = bufs[0][n:]
				break
			}
			n -= len(bufs[0])
			bufs = bufs[1:]
		}
	}
	return nil
}

// accepts reports why k more samples cannot be written now, if they cannot; w.mu is held.
func (w *Writer) accepts(k uint64) error {
	switch {
	case w.done:
		return ErrClosed
	case w.err != nil:
		return w.err
	case k <= w.n-w.count:
		return nil
	case k == 1:
		return fmt.Errorf("%w: %s: the file was created for n=%d samples; sample %d is one too many",
			ErrInvalid, w.path, w.n, w.count)
	}
	return fmt.Errorf("%w: %s: the file was created for n=%d samples; a batch of %d after %d written "+
		"would make sample %d one too many, so none of it was written", ErrInvalid, w.path, w.n, k, w.count, w.n)
}

// appendSample appends one sample the writer has room for; w.mu is held. A failure loses the file.
func (w *Writer) appendSample(p []byte) error {
	if w.comp != nil {
		p = w.comp.store(p)
	}
	w.crcs = append(w.crcs, checksumIEEE(p))
	w.offsets = append(w.offsets, w.pos)
	w.count++
	w.err = w.appendData(p)
	return w.err
}

// appendData adds stored bytes to the data area: to the memory stage while there is one
// with room, else small ones through the buffer, large ones straight to the file.
func (w *Writer) appendData(p []byte) error {
	if w.stage != nil {
		n := w.stage.add(p)
		w.pos += uint64(n)
		if n == len(p) {
			return nil
		}
		if err := w.place(w.storedCount(w.count)); err != nil {
			return err
		}
		p = p[n:]
	}
	if len(p) >= directWriteMin {
		if err := w.flush(); err != nil {
			return err
		}
		w.pos += uint64(len(p))
		if err := w.writeVectors([][]byte{p}, w.dataAt+w.pos-uint64(len(p))); err != nil {
			return err
		}
		w.startWriteback(w.dataAt + w.pos)
		return nil
	}
	for len(p) > 0 {
		room := w.bufferEnd() - len(w.buf)
		n := min(room, len(p))
		w.buf = append(w.buf, p[:n]...)
		w.pos += uint64(n)
		p = p[n:]
		if n == room {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// folioAlign is the file offset multiple (2 MiB, a huge page) at which buffered writes
// end, a sample split across two writes when it straddles one. A write puts its bytes in
// page-cache folios no larger than the aligned part of the file it covers, and a file
// mapping maps a 2 MiB folio whole, in one fault and one TLB entry. Writes ending anywhere
// left about half of a file of small samples in small folios. Measured here, 200 MB of
// 1 KiB samples in the page cache: 98 → 196 MB of the mapping in 2 MiB folios; a fresh
// process's page faults over a shuffled epoch 470 → 360, its first touch of every page
// 4.1-4.4 → 3.2-3.6 ms; writing them from Go, Close included, 2.27 → 2.76 GB/s (median of
// 16 runs; unchanged through Python, where gathering the samples dominates).
const folioAlign = 2 << 20

// bufferEnd is how full the buffer gets before it is written: up to writeBuffer, so that
// it ends at a multiple of folioAlign in the file.
func (w *Writer) bufferEnd() int {
	start := w.dataAt + w.pos - uint64(len(w.buf))
	return writeBuffer - int(start%folioAlign)
}

// flush hands the buffer to a background write and continues with the spare one, once
// the previous background write has finished.
func (w *Writer) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if err := w.wait(); err != nil {
		return err
	}
	data, off := w.buf, w.dataAt+w.pos-uint64(len(w.buf))
	done := make(chan error, 1)
	go func() { done <- w.writeAt(data, off) }()
	w.inflight = done
	w.buf, w.spare = w.spare[:0], data
	w.startWriteback(off)
	return nil
}

// wait waits for the background write, if any, and returns its error.
func (w *Writer) wait() error {
	if w.inflight == nil {
		return nil
	}
	err := <-w.inflight
	w.inflight = nil
	return err
}

// writeAt writes all of p at off (os.File.WriteAt splits it into calls Linux accepts).
func (w *Writer) writeAt(p []byte, off uint64) error {
	if _, err := w.tmp.WriteAt(p, int64(off)); err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	return nil
}

// writebackStep is how much written data accumulates before the kernel is asked to start
// writing it to disk.
const writebackStep = 16 << 20

// startWriteback asks the kernel to begin writing out data written so far (up to end),
// in steps of writebackStep, without waiting for it. Otherwise a file smaller than the
// dirty-page threshold (gigabytes here) reaches the disk only at the fsync in Close, and
// writing takes the time to produce the data plus the time to flush it instead of the
// larger of the two (measured: 64 MiB of 1 KiB samples, Close included, 0.29 → 0.38 GB/s).
// The request runs on a goroutine of its own: sync_file_range blocks while the device's
// queue is full, and the writer goes on meanwhile; a step due while one runs waits for the
// next, which then covers both.
//
// The data of an UnknownCount writer is left alone: placed for another count than the
// file ends with, it is copied and deleted at Close, and need not reach the disk at all.
func (w *Writer) startWriteback(end uint64) {
	if w.volatile || w.n == UnknownCount || end < w.writtenBack+writebackStep {
		return
	}
	if w.writeback != nil {
		select {
		case <-w.writeback:
			w.writeback = nil
		default:
			return
		}
	}
	done := make(chan struct{})
	fd, from := int(w.tmp.Fd()), int64(w.writtenBack)
	go func() {
		defer close(done)
		_ = unix.SyncFileRange(fd, from, int64(end)-from, unix.SYNC_FILE_RANGE_WRITE)
	}()
	w.writeback, w.writtenBack = done, end
}

// waitWriteback waits for the background writeback request, if any: the descriptor it
// uses must stay open until it returns.
func (w *Writer) waitWriteback() {
	if w.writeback != nil {
		<-w.writeback
		w.writeback = nil
	}
}

// Count is the number of samples written so far.
func (w *Writer) Count() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count
}

// Close completes the file: header, fsync, rename over the final path, fsync of the
// directory. With fewer samples than declared it fails with ErrInvalid and leaves
// nothing at the path. As for Reader, a second Close does nothing: it returns the first
// one's result (after Abort, nil), so a deferred Close after an explicit one is harmless.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return w.closeErr
	}
	w.closeErr = w.complete()
	if w.closeErr != nil {
		w.discard()
	}
	w.done = true
	return w.closeErr
}

func (w *Writer) complete() error {
	if w.err != nil {
		return w.err
	}
	if w.n != UnknownCount && w.count != w.n {
		return fmt.Errorf("%w: %s: the file was created for n=%d samples but %d were written",
			ErrInvalid, w.path, w.n, w.count)
	}
	return w.finish()
}

func (w *Writer) finish() error {
	if w.comp != nil {
		rec := w.comp.record()
		w.crcs = append(w.crcs, checksumIEEE(rec))
		w.offsets = append(w.offsets, w.pos)
		if err := w.appendData(rec); err != nil {
			return err
		}
	}
	if err := w.flush(); err != nil {
		return err
	}
	if err := w.wait(); err != nil {
		return err
	}
	w.waitWriteback()
	stored := uint64(len(w.offsets))
	if w.stage != nil {
		if err := w.place(stored); err != nil {
			return err
		}
	}
	out := w.tmp
	if dataAt, ok := headerSize(stored); !ok || dataAt != w.dataAt {
		final, err := w.moveBehindHeader()
		if err != nil {
			return err
		}
		out = final
	}
	if err := writeHeader(out, w.crcs, w.offsets, w.buf[:0]); err != nil {
		return fmt.Errorf("%s: writing header: %w", w.path, err)
	}
	if !w.volatile {
		if err := out.Sync(); err != nil {
			return fmt.Errorf("%s: %w", w.path, err)
		}
	}
	if err := os.Rename(out.Name(), w.path); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	if w.volatile {
		return nil
	}
	return syncDir(filepath.Dir(w.path))
}

// SetDurable(false) makes Close skip both fsyncs (and the writer skip its early writeback):
// for scratch files that a crash may lose. The file still appears complete at its path, or
// not at all, to every process while the machine stays up; after a power loss or kernel
// crash it may be missing or hold zeros. Durable is the default.
func (w *Writer) SetDurable(durable bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.volatile = !durable
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return &fs.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return nil
}

// Abort discards the file: nothing is left at the path (an earlier file there is kept).
func (w *Writer) Abort() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return nil
	}
	w.discard()
	return nil
}

func (w *Writer) discard() {
	w.done = true
	_ = w.wait()
	w.waitWriteback()
	_ = w.tmp.Close()
	_ = os.Remove(w.tmp.Name())
	if w.stage != nil {
		w.stage.release()
	}
	w.crcs, w.offsets, w.buf, w.spare, w.stage = nil, nil, nil, nil, nil
}
