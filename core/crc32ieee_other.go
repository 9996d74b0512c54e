//go:build !amd64

package core

const hasWideFold = false

func foldIEEE(crc uint32, p []byte) uint32 { panic("foldIEEE needs amd64") }
