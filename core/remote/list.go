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
		Key string `xml:"Key"`
	} `xml:"Contents"`
	IsTruncated           bool   `xml:"IsTruncated"`
	NextContinuationToken string `xml:"NextContinuationToken"`
}

// List returns the URLs of the objects directly under an s3:// prefix whose names end in
// suffix, sorted by key. Names starting with "." are skipped, as a shell glob would.
func (c *Client) List(prefixURL, suffix string) ([]string, error) {
	loc, err := c.locate(prefixURL)
	if err != nil {
		return nil, err
	}
	if !loc.s3 {
		return nil, fmt.Errorf("%w: listing %s: only s3:// prefixes can be listed", ErrUnsupported, prefixURL)
	}
	prefix := loc.key
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	var keys []string
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
			return nil, err
		}
		for _, obj := range page.Contents {
			name := path.Base(obj.Key)
			if strings.HasSuffix(name, suffix) && !strings.HasPrefix(name, ".") {
				keys = append(keys, obj.Key)
			}
		}
		if !page.IsTruncated || page.NextContinuationToken == "" {
			break
		}
		token = page.NextContinuationToken
	}
	slices.Sort(keys)
	urls := make([]string, len(keys))
	for i, k := range keys {
		urls[i] = "s3://" + loc.bucket + "/" + k
	}
	return urls, nil
}
