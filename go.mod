module github.com/ffrecord/ffrecord

go 1.26.8

require (
	github.com/klauspost/compress v1.20.3
	github.com/klauspost/crc32 v1.3.0
	github.com/pierrec/lz4/v4 v4.1.33
	golang.org/x/sys v0.49.0
)
