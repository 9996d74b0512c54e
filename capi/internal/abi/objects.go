package abi

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/ffrecord/ffrecord/core"
)

// ListObjects implements ffr_list_objects: the objects directly under the prefix, one a
// line ("name\tsize\tetag\n"), and the requests the listing took.
func ListObjects(url, options, buf unsafe.Pointer, size uintptr, needed, requests unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_list_objects"
	if url == nil || needed == nil || requests == nil {
		return failf(StatusInvalid, fn+": url, needed or requests is NULL")
	}
	*(*uint64)(requests) = 0
	client, status := clientFor(fn, options)
	if client == nil {
		return status
	}
	objects, pages, err := client.Objects(cString(url))
	*(*uint64)(requests) = uint64(pages)
	if err != nil {
		return fail(err)
	}
	var text strings.Builder
	for _, o := range objects {
		if strings.ContainsAny(o.Name, "\t\n") || strings.ContainsAny(o.ETag, "\t\n") {
			return failf(StatusInvalid, fmt.Sprintf("%s: object %q under %s has a tab or a newline in its name or ETag",
				fn, o.Name, cString(url)))
		}
		fmt.Fprintf(&text, "%s\t%d\t%s\n", o.Name, o.Size, o.ETag)
	}
	return copyText(text.String(), buf, size, needed)
}

// DescribeFile implements ffr_describe_file: the file's stamp into stamp[0..3), the ETag
// copied as text.
func DescribeFile(path, options, stamp, buf unsafe.Pointer, length uintptr, needed unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_describe_file"
	if path == nil || stamp == nil || needed == nil {
		return failf(StatusInvalid, fn+": path, stamp or needed is NULL")
	}
	opts, err := storageOptions(fn, options)
	if err != nil {
		return fail(err)
	}
	s, etag, err := core.DescribeFile(cString(path), opts)
	if err != nil {
		return fail(err)
	}
	putStamp(stamp, s)
	return copyText(etag, buf, length, needed)
}
