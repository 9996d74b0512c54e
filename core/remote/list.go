package remote

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
)

// listPage is the part of a ListObjectsV2 answer used here.
type listPage struct {
	Contents []struct {
		Key  string `xml:"Key"`
		Size int64  `xml:"Size"`
		ETag string `xml:"ETag"`
	} `xml:"Contents"`
	CommonPrefixes []struct {
		Prefix string `xml:"Prefix"`
	} `xml:"CommonPrefixes"`
	IsTruncated           bool   `xml:"IsTruncated"`
	NextContinuationToken string `xml:"NextContinuationToken"`
}

// List returns the URLs of the objects directly under an s3:// prefix whose names keep
// accepts, sorted by key.
func (c *Client) List(prefixURL string, keep func(name string) bool) ([]string, error) {
	loc, prefix, err := c.listLocation(prefixURL)
	if err != nil {
		return nil, err
	}
	var keys []string
	err = c.listPages(loc, prefix, func(page *listPage) {
		for _, obj := range page.Contents {
			if keep(path.Base(obj.Key)) {
				keys = append(keys, obj.Key)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(keys)
	urls := make([]string, len(keys))
	for i, k := range keys {
		urls[i] = "s3://" + loc.bucket + "/" + k
	}
	return urls, nil
}

// Entries returns what lies directly under an s3:// prefix, as a directory listing would:
// the names of its objects and, followed by "/", of its "sub-directories" (the longer keys'
// next path segment), sorted. An empty or missing prefix has no entries.
func (c *Client) Entries(prefixURL string) ([]string, error) {
	loc, prefix, err := c.listLocation(prefixURL)
	if err != nil {
		return nil, err
	}
	var names []string
	err = c.listPages(loc, prefix, func(page *listPage) {
		for _, obj := range page.Contents {
			if name := strings.TrimPrefix(obj.Key, prefix); name != "" {
				names = append(names, name)
			}
		}
		for _, p := range page.CommonPrefixes {
			if name := strings.TrimPrefix(p.Prefix, prefix); name != "" && name != "/" {
				names = append(names, name)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// ObjectInfo is an object as a listing describes it: its name under the prefix listed,
// its size and its ETag (the version a read can be pinned to, see Versions).
type ObjectInfo struct {
	Name string
	Size int64
	ETag string
}

// Objects returns the objects directly under an s3:// prefix (not its "sub-directories"),
// sorted by name, with the number of requests the listing took (one per page of 1,000).
// Their ETags and sizes pin later reads of them without a HEAD each.
func (c *Client) Objects(prefixURL string) ([]ObjectInfo, int, error) {
	loc, prefix, err := c.listLocation(prefixURL)
	if err != nil {
		return nil, 0, err
	}
	var objects []ObjectInfo
	pages := 0
	err = c.listPages(loc, prefix, func(page *listPage) {
		pages++
		for _, obj := range page.Contents {
			if name := strings.TrimPrefix(obj.Key, prefix); name != "" {
				objects = append(objects, ObjectInfo{Name: name, Size: obj.Size, ETag: trimETag(obj.ETag)})
			}
		}
	})
	if err != nil {
		return nil, pages, err
	}
	slices.SortFunc(objects, func(a, b ObjectInfo) int { return strings.Compare(a.Name, b.Name) })
	return objects, pages, nil
}

// listLocation is the bucket and key prefix (ending in "/" unless empty) listed for prefixURL.
func (c *Client) listLocation(prefixURL string) (*location, string, error) {
	loc, err := c.locate(prefixURL)
	if err != nil {
		return nil, "", err
	}
	if !loc.s3 {
		return nil, "", fmt.Errorf("%w: listing %s: only s3:// prefixes can be listed", ErrUnsupported, prefixURL)
	}
	prefix := loc.key
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return loc, prefix, nil
}

// listPages sends ListObjectsV2 requests (delimiter "/") for prefix until the answer is
// complete, handing each page to visit.
func (c *Client) listPages(loc *location, prefix string, visit func(*listPage)) error {
	token := ""
	for {
		q := url.Values{"list-type": {"2"}, "prefix": {prefix}, "delimiter": {"/"}}
		if token != "" {
			q.Set("continuation-token", token)
		}
		target := c.objectURL(loc.bucket, "", q)
		var page listPage
		err := c.do(context.Background(), "LIST", loc, func(ctx context.Context) (*http.Request, error) {
			return c.request(ctx, http.MethodGet, loc, target, nil, emptyHash)
		}, func(resp *http.Response) error {
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			return xml.Unmarshal(body, &page)
		})
		if err != nil {
			return err
		}
		visit(&page)
		if !page.IsTruncated || page.NextContinuationToken == "" {
			return nil
		}
		token = page.NextContinuationToken
	}
}
