package core

import (
	"bytes"
	"testing"
)

// crc32cBitwise is an independent bit-at-a-time CRC-32C (reflected polynomial 0x82F63B78).
func crc32cBitwise(data []byte) uint32 {
	crc := ^uint32(0)
	for _, b := range data {
		crc ^= uint32(b)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82F63B78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

func TestUpdateCRC32C(t *testing.T) {
	if got := UpdateCRC32C(0, []byte("123456789")); got != 0xE3069283 {
		t.Fatalf("check value: got %#08x, want 0xe3069283", got)
	}
	if got := UpdateCRC32C(0, nil); got != 0 {
		t.Fatalf("empty input: got %#08x, want 0", got)
	}
	data := bytes.Repeat([]byte("ffrecord castagnoli "), 5000)
	for _, size := range []int{1, 7, 8, 63, 64, 255, 4096, 65537, len(data)} {
		want := crc32cBitwise(data[:size])
		if got := UpdateCRC32C(0, data[:size]); got != want {
			t.Fatalf("%d bytes: got %#08x, want %#08x", size, got, want)
		}
		if got := UpdateCRC32C(UpdateCRC32C(0, data[:size/3]), data[size/3:size]); got != want {
			t.Fatalf("%d bytes in two pieces: got %#08x, want %#08x", size, got, want)
		}
	}
}
