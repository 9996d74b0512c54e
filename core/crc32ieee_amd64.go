package core

import "golang.org/x/sys/cpu"

// hasWideFold: the CPU has VPCLMULQDQ (CPUID leaf 7, ECX bit 10) and the OS saves the
// 256-bit registers (AVX2), besides the PCLMULQDQ and SSE4.1 of the final reduction.
var hasWideFold = cpu.X86.HasAVX2 && cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE41 && cpuidLeaf7ECX()&(1<<10) != 0

// cpuidLeaf7ECX is ECX of CPUID leaf 7, sub-leaf 0.
func cpuidLeaf7ECX() uint32

// foldIEEE returns the CRC-32/IEEE state after p, starting from state crc (the checksum
// inverted, as inside the algorithm). len(p) must be at least foldMinBytes and a multiple
// of 16.
//
//go:noescape
func foldIEEE(crc uint32, p []byte) uint32
