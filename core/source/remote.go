package source

import "github.com/ffrecord/ffrecord/core/remote"

// Object is an HTTP(S) or S3 object as a Source: its size and ETag as a HEAD found them.
type Object struct {
	obj        *remote.Object
	name, etag string
	size       int64
}

// openRemote asks the store for the object's size and ETag, unless opts pins them (then no
// request is made: the first read, conditional on that ETag, finds a replaced object).
func openRemote(url string, opts remote.Options, stats *Stats) (*Object, error) {
	client, err := remote.For(opts)
	if err != nil {
		return nil, &OptionsError{err}
	}
	obj, err := client.Object(url)
	if err != nil {
		return nil, &OptionsError{err}
	}
	if stats != nil {
		obj.SetObserver(stats)
	}
	if v, ok := opts.Versions[url]; ok && v.ETag != "" && v.Size >= 0 {
		obj.Pin(v.ETag)
		return &Object{obj: obj, name: url, etag: v.ETag, size: v.Size}, nil
	}
	size, etag, err := obj.Stat()
	if err != nil {
		return nil, err
	}
	return &Object{obj: obj, name: url, etag: etag, size: size}, nil
}

func (o *Object) Name() string    { return o.name }
func (o *Object) Size() int64     { return o.size }
func (o *Object) Version() string { return o.etag }
func (o *Object) Close() error    { return nil } // connections belong to the shared client

// ReadRanges reads spans with concurrent range requests, nearby spans merged.
func (o *Object) ReadRanges(spans []Span) error { return o.obj.ReadRanges(spans) }

// ReadSpan reads one span with exactly one request (a chunk: one GET).
func (o *Object) ReadSpan(sp Span) error { return o.obj.ReadSpan(sp) }
