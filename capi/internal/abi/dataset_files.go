package abi

import (
	"strings"
	"unsafe"

	"github.com/ffrecord/ffrecord/core"
)

// DatasetFiles implements ffr_dataset_files.
func DatasetFiles(dir, buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_dataset_files"
	if dir == nil {
		return failf(StatusInvalid, fn+": dir is NULL")
	}
	files, err := core.DatasetFiles(cString(dir))
	if err != nil {
		return fail(err)
	}
	return copyOutLines(fn, files, buf, size, needed)
}

// DatasetURLs implements ffr_dataset_urls.
func DatasetURLs(url, options, buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_dataset_urls"
	if url == nil {
		return failf(StatusInvalid, fn+": url is NULL")
	}
	opts, err := storageOptions(fn, options)
	if err != nil {
		return fail(err)
	}
	urls, err := core.DatasetURLs(cString(url), opts)
	if err != nil {
		return fail(err)
	}
	return copyOutLines(fn, urls, buf, size, needed)
}

// copyOutLines copies names into buf one a line (the buffer protocol of copyOutText); a
// name holding a newline cannot be listed so and is refused.
func copyOutLines(fn string, names []string, buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) int32 {
	var text strings.Builder
	for _, f := range names {
		if strings.ContainsRune(f, '\n') {
			return failf(StatusInvalid, fn+": "+f+": a file name holding a newline cannot be listed one a line")
		}
		text.WriteString(f + "\n")
	}
	return copyOutText(fn, text.String(), buf, size, needed)
}

// PartName implements ffr_part_name.
func PartName(k, nparts uint64, buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	return copyOutText("ffr_part_name", core.PartName(k, nparts), buf, size, needed)
}
