package abi

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"unsafe"

	"github.com/ffrecord/ffrecord/core"
)

// TestHeaderConstants keeps the Go mirrors of the header's #defines in step with it.
func TestHeaderConstants(t *testing.T) {
	src, err := os.ReadFile("../../ffrecord.h")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{
		"FFR_ABI_VERSION":    int64(ABIVersion),
		"FFR_OK":             int64(StatusOK),
		"FFR_E_INVALID":      int64(StatusInvalid),
		"FFR_E_INDEX":        int64(StatusIndex),
		"FFR_E_IO":           int64(StatusIO),
		"FFR_E_NOTFOUND":     int64(StatusNotFound),
		"FFR_E_CORRUPT":      int64(StatusCorrupt),
		"FFR_E_CHECKSUM":     int64(StatusChecksum),
		"FFR_E_CLOSED":       int64(StatusClosed),
		"FFR_E_HANDLE":       int64(StatusHandle),
		"FFR_E_SHORTBUF":     int64(StatusShortBuf),
		"FFR_E_INTERNAL":     int64(StatusInternal),
		"FFR_CHECK_DATA":     int64(FlagCheckData),
		"FFR_DIRECT":         int64(FlagDirect),
		"FFR_NO_DESCRIPTORS": int64(FlagNoDescriptors),
		"FFR_COMPRESS_NONE":  int64(CompressNone),
		"FFR_COMPRESS_LZ4":   int64(CompressLZ4),
		"FFR_COMPRESS_ZSTD":  int64(CompressZstd),

		"FFR_INFO_SAMPLES":      InfoSamples,
		"FFR_INFO_STORED":       InfoStored,
		"FFR_INFO_COMPRESSION":  InfoCompression,
		"FFR_INFO_HEADER_BYTES": InfoHeaderBytes,
		"FFR_INFO_DATA_BYTES":   InfoDataBytes,
		"FFR_INFO_FILE_BYTES":   InfoFileBytes,
		"FFR_INFO_METADATA":     InfoMetadata,
		"FFR_INFO_FIELDS":       InfoFields,
		"FFR_METADATA_INTACT":   int64(MetadataIntact),
		"FFR_METADATA_LEGACY":   int64(MetadataLegacy),
		"FFR_METADATA_DAMAGED":  int64(MetadataDamaged),
		"FFR_INFO_READ_FROM":    InfoReadFrom,
		"FFR_READ_LOCAL":        int64(ReadLocal),
		"FFR_READ_REMOTE":       int64(ReadRemote),
		"FFR_READ_CACHED":       int64(ReadCached),
		"FFR_PATH_LOCAL":        int64(PathLocal),
		"FFR_PATH_S3":           int64(PathS3),
		"FFR_PATH_HTTP":         int64(PathHTTP),

		"FFR_STAT_REQUESTS":   StatRequests,
		"FFR_STAT_BYTES":      StatBytes,
		"FFR_STAT_RETRIES":    StatRetries,
		"FFR_STAT_HITS":       StatHits,
		"FFR_STAT_MISSES":     StatMisses,
		"FFR_STAT_EVICTIONS":  StatEvictions,
		"FFR_STAT_BYPASSED":   StatBypassed,
		"FFR_STAT_PREFETCHED": StatPrefetched,
		"FFR_STAT_DELIVERED":  StatDelivered,
		"FFR_STAT_FIELDS":     StatFields,
	}
	define := regexp.MustCompile(`(?m)^#define\s+(FFR_\w+)\s+(-?\d+)u?\b`)
	got := map[string]int64{}
	for _, m := range define.FindAllStringSubmatch(string(src), -1) {
		v, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		got[m[1]] = v
	}
	for name, v := range want {
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("%s: header has %d (present: %v), Go has %d", name, g, ok, v)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s in the header has no Go mirror", name)
		}
	}
}

func TestStatusOf(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("x.ffr: sample 3: %w", err) }
	tests := []struct {
		name string
		err  error
		want int32
	}{
		{"index", wrap(core.ErrIndex), StatusIndex},
		{"checksum", wrap(core.ErrChecksum), StatusChecksum},
		{"corrupt", wrap(core.ErrCorrupt), StatusCorrupt},
		{"closed", wrap(core.ErrClosed), StatusClosed},
		{"short buffer", wrap(io.ErrShortBuffer), StatusShortBuf},
		{"invalid", wrap(core.ErrInvalid), StatusInvalid},
		{"not found", &fs.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}, StatusNotFound},
		{"permission", &fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, StatusIO},
		{"errno", wrap(syscall.EIO), StatusIO},
		{"unclassified", errors.New("engine gave up"), StatusIO},
		{"call error", &callError{StatusHandle, "bad"}, StatusHandle},
		// A short buffer is also invalid use; the more specific class wins, and a checksum
		// failure found while reading is reported as such, not as the I/O around it.
		{"short buffer and invalid", fmt.Errorf("%w: %w", core.ErrInvalid, io.ErrShortBuffer), StatusShortBuf},
		{"checksum and corrupt", fmt.Errorf("%w: %w", core.ErrCorrupt, core.ErrChecksum), StatusChecksum},
		{"index and invalid", fmt.Errorf("%w: %w", core.ErrInvalid, core.ErrIndex), StatusIndex},
		{"closed and I/O", fmt.Errorf("%w: %w", syscall.EBADF, core.ErrClosed), StatusClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := statusOf(tt.err); got != tt.want {
				t.Errorf("statusOf(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

// TestPanicBecomesInternal checks that a panic inside the library comes back as
// FFR_E_INTERNAL with its message, through a real entry point.
func TestPanicBecomesInternal(t *testing.T) {
	noLeaks(t)
	h := readers.add(nil) // a nil reader makes every reader call panic inside the core
	defer readers.remove("test", h)
	var n uint64
	expect(t, StatusInternal, func() int32 { return ReaderLen(h, unsafe.Pointer(&n)) }, "internal error", "nil pointer")
}
