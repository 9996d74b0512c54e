#include "textflag.h"

// CRC-32/IEEE by folding with carry-less multiplication (Intel, "Fast CRC Computation for
// Generic Polynomials Using PCLMULQDQ Instruction", 2009), in the bit-reflected domain.
// Four 256-bit registers hold eight 128-bit lanes: 128 bytes are folded per step. A
// constant pair (k(d+32), k(d-32)), k(n) = reflected (x^n mod P) << 1, folds a lane
// forward by d bits. The pairs below were computed for P = 0x104C11DB7.

DATA fold1024<>+0(SB)/8, $0x1e88ef372
DATA fold1024<>+8(SB)/8, $0x14a7fe880
GLOBL fold1024<>(SB), RODATA, $16
DATA fold512<>+0(SB)/8, $0x154442bd4
DATA fold512<>+8(SB)/8, $0x1c6e41596
GLOBL fold512<>(SB), RODATA, $16
DATA fold256<>+0(SB)/8, $0x0f1da05aa
DATA fold256<>+8(SB)/8, $0x15a546366
GLOBL fold256<>(SB), RODATA, $16
DATA fold128<>+0(SB)/8, $0x1751997d0
DATA fold128<>+8(SB)/8, $0x0ccaa009e
GLOBL fold128<>(SB), RODATA, $16
// k(64), for 64 bits down to 32
DATA fold64<>+0(SB)/8, $0x163cd6124
GLOBL fold64<>(SB), RODATA, $8
// Barrett reduction: the reflected polynomial and the reflected floor(x^64 / P)
DATA barrett<>+0(SB)/8, $0x1db710641
DATA barrett<>+8(SB)/8, $0x1f7011641
GLOBL barrett<>(SB), RODATA, $16

// func cpuidLeaf7ECX() uint32
TEXT ·cpuidLeaf7ECX(SB), NOSPLIT, $0-4
	MOVL $7, AX
	MOVL $0, CX
	CPUID
	MOVL CX, ret+0(FP)
	RET

// func foldIEEE(crc uint32, p []byte) uint32
TEXT ·foldIEEE(SB), NOSPLIT, $0-36
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX

	VMOVDQU (SI), Y1
	VMOVDQU 32(SI), Y2
	VMOVDQU 64(SI), Y3
	VMOVDQU 96(SI), Y4
	VMOVD   AX, X0
	VPXOR   Y0, Y1, Y1
	ADDQ    $128, SI
	SUBQ    $128, CX
	VBROADCASTI128 fold1024<>(SB), Y0

fold128bytes:
	CMPQ CX, $128
	JB   lanes
	VPCLMULQDQ $0x00, Y0, Y1, Y5
	VPCLMULQDQ $0x11, Y0, Y1, Y1
	VPCLMULQDQ $0x00, Y0, Y2, Y6
	VPCLMULQDQ $0x11, Y0, Y2, Y2
	VPCLMULQDQ $0x00, Y0, Y3, Y7
	VPCLMULQDQ $0x11, Y0, Y3, Y3
	VPCLMULQDQ $0x00, Y0, Y4, Y8
	VPCLMULQDQ $0x11, Y0, Y4, Y4
	VPXOR      (SI), Y5, Y5
	VPXOR      32(SI), Y6, Y6
	VPXOR      64(SI), Y7, Y7
	VPXOR      96(SI), Y8, Y8
	VPXOR      Y5, Y1, Y1
	VPXOR      Y6, Y2, Y2
	VPXOR      Y7, Y3, Y3
	VPXOR      Y8, Y4, Y4
	ADDQ       $128, SI
	SUBQ       $128, CX
	JMP        fold128bytes

lanes:
	// lanes 0-3 forward by 512 bits onto lanes 4-7
	VBROADCASTI128 fold512<>(SB), Y0
	VPCLMULQDQ $0x00, Y0, Y1, Y5
	VPCLMULQDQ $0x11, Y0, Y1, Y1
	VPXOR      Y5, Y1, Y1
	VPXOR      Y1, Y3, Y3
	VPCLMULQDQ $0x00, Y0, Y2, Y6
	VPCLMULQDQ $0x11, Y0, Y2, Y2
	VPXOR      Y6, Y2, Y2
	VPXOR      Y2, Y4, Y4
	// lanes 4-5 forward by 256 bits onto lanes 6-7
	VBROADCASTI128 fold256<>(SB), Y0
	VPCLMULQDQ $0x00, Y0, Y3, Y5
	VPCLMULQDQ $0x11, Y0, Y3, Y3
	VPXOR      Y5, Y3, Y3
	VPXOR      Y3, Y4, Y4
	// lane 6 forward by 128 bits onto lane 7: X1
	VEXTRACTI128 $1, Y4, X2
	VMOVDQU    fold128<>(SB), X0
	VPCLMULQDQ $0x00, X0, X4, X5
	VPCLMULQDQ $0x11, X0, X4, X1
	VPXOR      X5, X1, X1
	VPXOR      X2, X1, X1
	VZEROUPPER

fold16bytes:
	CMPQ      CX, $16
	JB        reduce
	MOVOU     (SI), X2
	MOVOA     X1, X5
	PCLMULQDQ $0x00, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X2, X1
	ADDQ      $16, SI
	SUBQ      $16, CX
	JMP       fold16bytes

reduce:
	// 128 bits down to 96: the low half times k(96), added to the high half
	PCMPEQB   X3, X3
	PCLMULQDQ $0x01, X1, X0
	PSRLDQ    $8, X1
	PXOR      X0, X1
	// 96 bits down to 64
	MOVOA     X1, X2
	MOVQ      fold64<>(SB), X0
	PSRLQ     $32, X3
	PSRLDQ    $4, X2
	PAND      X3, X1
	PCLMULQDQ $0x00, X0, X1
	PXOR      X2, X1
	// Barrett reduction to 32 bits
	MOVOU     barrett<>(SB), X0
	MOVOA     X1, X2
	PAND      X3, X1
	PCLMULQDQ $0x10, X0, X1
	PAND      X3, X1
	PCLMULQDQ $0x00, X0, X1
	PXOR      X2, X1
	PEXTRD    $1, X1, AX
	MOVL      AX, ret+32(FP)
	RET
