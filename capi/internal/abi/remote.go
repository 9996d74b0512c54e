package abi

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/ffrecord/ffrecord/core"
	"github.com/ffrecord/ffrecord/core/remote"
)

// ReaderOpenOptions implements ffr_reader_open_options.
func ReaderOpenOptions(paths unsafe.Pointer, npaths uint64, flags uint32, options, handle unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	return readerOpen("ffr_reader_open_options", paths, npaths, flags, nil, options, handle)
}

// Upload implements ffr_upload.
func Upload(path, url, options unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_upload"
	if path == nil || url == nil {
		return failf(StatusInvalid, fn+": path or url is NULL")
	}
	client, status := clientFor(fn, options)
	if client == nil {
		return status
	}
	if err := client.Upload(cString(path), cString(url)); err != nil {
		return fail(err)
	}
	return StatusOK
}

// CheckURL implements ffr_check_url.
func CheckURL(url unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_check_url"
	if url == nil {
		return failf(StatusInvalid, fn+": url is NULL")
	}
	if err := remote.CheckURL(cString(url)); err != nil {
		return fail(err)
	}
	return StatusOK
}

// PutNew implements ffr_put_new.
func PutNew(url, options, data unsafe.Pointer, size uint64) (status int32) {
	defer recoverPanic(&status)
	return withBody("ffr_put_new", url, options, data, size, (*remote.Client).PutNew)
}

// RemoveIfHolds implements ffr_remove_if_holds.
func RemoveIfHolds(url, options, data unsafe.Pointer, size uint64) (status int32) {
	defer recoverPanic(&status)
	return withBody("ffr_remove_if_holds", url, options, data, size, (*remote.Client).DeleteIfHolds)
}

// withBody runs call on the URL and a copy of the caller's bytes (not held past the call).
func withBody(fn string, url, options, data unsafe.Pointer, size uint64,
	call func(*remote.Client, string, []byte) error) int32 {
	if url == nil || (data == nil && size > 0) {
		return failf(StatusInvalid, fn+": url or data is NULL")
	}
	client, status := clientFor(fn, options)
	if client == nil {
		return status
	}
	body := make([]byte, size)
	if size > 0 {
		copy(body, unsafe.Slice((*byte)(data), size))
	}
	if err := call(client, cString(url), body); err != nil {
		return fail(err)
	}
	return StatusOK
}

// Remove implements ffr_remove.
func Remove(url, options unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_remove"
	if url == nil {
		return failf(StatusInvalid, fn+": url is NULL")
	}
	client, status := clientFor(fn, options)
	if client == nil {
		return status
	}
	if err := client.Delete(cString(url)); err != nil {
		return fail(err)
	}
	return StatusOK
}

// FetchText implements ffr_fetch_text: the document, kept in the cache directory as the
// last copy seen (ffr_fetched_text).
func FetchText(url, options, buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	return textCall("ffr_fetch_text", url, options, buf, size, needed, func(u string, opts remote.Options) ([]byte, error) {
		client, err := remote.For(opts)
		if err != nil {
			return nil, &callError{StatusInvalid, fmt.Sprintf("ffr_fetch_text: %v", err)}
		}
		obj, err := client.Object(u)
		if err != nil {
			return nil, err
		}
		data, err := obj.ReadAll(core.MaxText)
		if err == nil {
			core.RememberText(opts, u, data)
		}
		return data, err
	})
}

// FetchedText implements ffr_fetched_text.
func FetchedText(url, options, buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	return textCall("ffr_fetched_text", url, options, buf, size, needed, func(u string, opts remote.Options) ([]byte, error) {
		data, ok := core.RememberedText(opts, u)
		if !ok {
			return nil, &callError{StatusNotFound, "ffr_fetched_text: no copy of this document kept"}
		}
		return data, nil
	})
}

// textCall is a call that copies the text of the document at url into buf (the buffer
// protocol of ffr_fetch_text): read gives it, from the URL and the call's storage options.
func textCall(fn string, url, options, buf unsafe.Pointer, size uintptr, needed unsafe.Pointer,
	read func(url string, opts remote.Options) ([]byte, error)) int32 {
	if url == nil || needed == nil {
		return failf(StatusInvalid, fn+": url or needed is NULL")
	}
	opts, err := storageOptions(fn, options)
	if err != nil {
		return fail(err)
	}
	data, err := read(cString(url), opts)
	if err != nil {
		return fail(err)
	}
	return copyText(string(data), buf, size, needed)
}

// ListEntries implements ffr_list.
func ListEntries(url, options, buf unsafe.Pointer, size uintptr, needed unsafe.Pointer) (status int32) {
	defer recoverPanic(&status)
	const fn = "ffr_list"
	if url == nil || needed == nil {
		return failf(StatusInvalid, fn+": url or needed is NULL")
	}
	client, status := clientFor(fn, options)
	if client == nil {
		return status
	}
	names, err := client.Entries(cString(url))
	if err != nil {
		return fail(err)
	}
	text := strings.Join(names, "\n")
	if len(names) > 0 {
		text += "\n"
	}
	return copyText(text, buf, size, needed)
}

// clientFor is the client for a call's JSON storage options; nil and the failure's status
// when the options are bad.
func clientFor(fn string, options unsafe.Pointer) (*remote.Client, int32) {
	opts, err := storageOptions(fn, options)
	if err != nil {
		return nil, fail(err)
	}
	client, err := remote.For(opts)
	if err != nil {
		return nil, failf(StatusInvalid, fmt.Sprintf("%s: %v", fn, err))
	}
	return client, StatusOK
}

// storageOptions parses the JSON options of a call (NULL: the defaults).
func storageOptions(fn string, options unsafe.Pointer) (remote.Options, error) {
	text := ""
	if options != nil {
		text = cString(options)
	}
	opts, err := remote.ParseOptions(text)
	if err != nil {
		return opts, &callError{StatusInvalid, fmt.Sprintf("%s: %v", fn, err)}
	}
	return opts, nil
}
