package abi

import (
	"testing"
	"unsafe"
)

func TestCRC32C(t *testing.T) {
	data := []byte("123456789")
	var out uint32
	must(t, func() int32 { return CRC32C(0, unsafe.Pointer(&data[0]), uint64(len(data)), unsafe.Pointer(&out)) })
	if out != 0xE3069283 {
		t.Fatalf("got %#08x, want 0xe3069283", out)
	}
	must(t, func() int32 { return CRC32C(0, nil, 0, unsafe.Pointer(&out)) })
	if out != 0 {
		t.Fatalf("empty: got %#08x, want 0", out)
	}
	expect(t, StatusInvalid, func() int32 { return CRC32C(0, nil, 3, unsafe.Pointer(&out)) },
		"ffr_crc32c", "data is NULL")
	expect(t, StatusInvalid, func() int32 { return CRC32C(0, unsafe.Pointer(&data[0]), 1, nil) },
		"ffr_crc32c", "out is NULL")
}
