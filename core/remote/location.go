package remote

import (
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Schemes a path may start with to name a remote object; file:// names a local one.
var schemes = []string{"s3://", "http://", "https://"}

// IsURL reports whether path names a remote object (s3://, http://, https://).
func IsURL(path string) bool {
	for _, s := range schemes {
		if hasScheme(path, s) {
			return true
		}
	}
	return false
}

// hasScheme reports whether path starts with scheme (such as "s3://"), in any case.
func hasScheme(path, scheme string) bool {
	return len(path) >= len(scheme) && strings.EqualFold(path[:len(scheme)], scheme)
}

// LocalPath returns the local path of a file:// URL, and ok false for anything else.
func LocalPath(path string) (local string, ok bool, err error) {
	if !hasScheme(path, "file://") {
		return "", false, nil
	}
	u, err := url.Parse(path)
	if err != nil {
		return "", true, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", true, fmt.Errorf("%w: %s names host %q; file URLs must be local", ErrBadURL,
			withoutUserinfo(path), u.Host)
	}
	return u.Path, true, nil
}

// PathKind is what a path names.
type PathKind int

const (
	KindLocal PathKind = iota // a local file or directory (perhaps as a file:// URL)
	KindS3                    // an object or prefix behind s3://
	KindHTTP                  // an object behind http:// or https:// (read only)
)

// Locate says where path leads, without a request: for an s3://, http:// or https:// URL
// its kind (the URL returned as it is, unchecked: CheckURL checks it); otherwise KindLocal
// and the path to open, a file:// URL's local path or any other path unchanged.
func Locate(path string) (local string, kind PathKind, err error) {
	switch {
	case hasScheme(path, s3Scheme):
		return path, KindS3, nil
	case IsURL(path):
		return path, KindHTTP, nil
	}
	if p, ok, err := LocalPath(path); ok {
		return p, KindLocal, err
	}
	return path, KindLocal, nil
}

// location is where an object lives: an S3 bucket and key, or a plain HTTP(S) URL.
type location struct {
	raw    string // as the user wrote it, for messages
	s3     bool
	bucket string
	key    string
	url    string // http(s) URL of the object (S3: resolved against the endpoint)
}

func (c *Client) locate(raw string) (*location, error) {
	loc, err := parseLocation(raw)
	if err == nil && loc.s3 {
		loc.url = c.objectURL(loc.bucket, loc.key, nil)
	}
	return loc, err
}

// CheckURL reports why raw names no object this package could reach (ErrBadURL), as any
// request to it would, without making one.
func CheckURL(raw string) error {
	_, err := parseLocation(raw)
	return err
}

// parseLocation reads a URL as a location; an S3 location's url is left to the client.
func parseLocation(raw string) (*location, error) {
	if hasScheme(raw, s3Scheme) {
		bucket, key, err := splitS3(raw)
		if err != nil {
			return nil, err
		}
		return &location{raw: raw, s3: true, bucket: bucket, key: key}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		// Neither the URL nor the parser's detail is quoted: either may hold a password
		// (a password with a "/" is read as the host's port).
		return nil, fmt.Errorf("%w: an http(s) URL that does not parse", ErrBadURL)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		switch {
		case u.User != nil:
			// A URL names the file in every message, in fnames and in reprs: a password
			// in it would be shown everywhere.
			return nil, fmt.Errorf("%w: %s: URLs with credentials (user:password@) are not accepted", ErrBadURL,
				withoutUserinfo(raw))
		case u.Host == "":
			return nil, fmt.Errorf("%w: %s has no host", ErrBadURL, raw)
		}
		return &location{raw: raw, url: raw}, nil
	}
	return nil, fmt.Errorf("%w: %s: scheme %q is not s3, http or https", ErrBadURL, raw, u.Scheme)
}

const (
	s3Scheme     = "s3://"
	maxS3KeySize = 1024 // bytes of UTF-8, S3's limit
)

// splitS3 splits an s3:// URL into its bucket and key. S3 keys are opaque strings, not URL
// paths: the bucket runs to the first "/", and everything after that "/" is the key,
// verbatim: "?", "#", "%" and "%2F" are characters of the key, never a query, a fragment
// or an escape. A key is valid UTF-8 of at most 1024 bytes (S3's rules; NUL is refused
// with every path); an empty key names the bucket's top level. A bucket is letters, digits,
// ".", "-" and "_".
func splitS3(raw string) (bucket, key string, err error) {
	if !hasScheme(raw, s3Scheme) {
		return "", "", fmt.Errorf("%w: %q is not an s3:// URL", ErrBadURL, raw)
	}
	bucket, key, _ = strings.Cut(raw[len(s3Scheme):], "/")
	switch {
	case bucket == "":
		return "", "", fmt.Errorf("%w: %s has no bucket", ErrBadURL, raw)
	case strings.IndexFunc(bucket, notBucketRune) >= 0:
		// Not quoted: "s3://user:password@bucket/…" lands here.
		return "", "", fmt.Errorf("%w: the bucket of an s3:// URL holds a character buckets cannot "+
			"(they are letters, digits, '.', '-' and '_')", ErrBadURL)
	case !utf8.ValidString(key):
		return "", "", fmt.Errorf("%w: the key of %q is not valid UTF-8", ErrBadURL, raw)
	case len(key) > maxS3KeySize:
		return "", "", fmt.Errorf("%w: the key of %s is %d bytes, more than S3's %d", ErrBadURL, raw, len(key), maxS3KeySize)
	}
	return bucket, key, nil
}

func notBucketRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_')
}

// objectURL is the HTTP URL of an S3 key (empty key: the bucket) with a query.
func (c *Client) objectURL(bucket, key string, query url.Values) string {
	base := *c.endpoint
	escaped := escapeKey(key)
	if c.virtualHosted {
		base.Host = bucket + "." + base.Host
		base.Path = strings.TrimSuffix(base.Path, "/") + "/" + key
		base.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + "/" + escaped
	} else {
		prefix := strings.TrimSuffix(base.Path, "/") + "/" + bucket + "/"
		base.Path = prefix + key
		base.RawPath = prefix + escaped
	}
	if query != nil {
		base.RawQuery = query.Encode()
	}
	return base.String()
}

// escapeKey escapes a key as S3's canonical URI wants it: every byte but the unreserved
// ones and "/".
func escapeKey(key string) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == '~' || c == '/' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
