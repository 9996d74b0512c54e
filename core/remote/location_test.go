package remote

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// S3 keys are opaque: everything after the bucket's "/" is the key, verbatim, and is sent
// escaped once, signed as sent.
func TestS3KeysAreOpaque(t *testing.T) {
	srv := newFakeServer(t, pattern(100))
	env := map[string]string{"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret"}
	c := testClient(t, Options{EndpointURL: srv.URL, Region: "us-east-1", Env: env})
	for raw, want := range map[string]struct{ bucket, key, path string }{
		"s3://demo/results?v2.ffr":  {"demo", "results?v2.ffr", "/demo/results%3Fv2.ffr"},
		"s3://demo/a#frag.ffr":      {"demo", "a#frag.ffr", "/demo/a%23frag.ffr"},
		"s3://demo/x%2Fy.ffr":       {"demo", "x%2Fy.ffr", "/demo/x%252Fy.ffr"},
		"S3://demo/dir/ünï 1+2.ffr": {"demo", "dir/ünï 1+2.ffr", "/demo/dir/%C3%BCn%C3%AF%201%2B2.ffr"},
		"s3://demo//lead.ffr":       {"demo", "/lead.ffr", "/demo//lead.ffr"},
		"s3://demo":                 {"demo", "", "/demo/"},
	} {
		bucket, key, err := splitS3(raw)
		if err != nil || bucket != want.bucket || key != want.key {
			t.Fatalf("%s: bucket %q key %q (%v), want %q %q", raw, bucket, key, err, want.bucket, want.key)
		}
		o, err := c.Object(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.ReadRanges([]Span{{Off: 0, Buf: make([]byte, 1)}}); err != nil {
			t.Fatal(err)
		}
		sent := srv.seen[len(srv.seen)-1]
		if got := sent.URL.EscapedPath(); got != want.path || sent.URL.RawQuery != "" {
			t.Fatalf("%s: sent %q ?%q, want %q", raw, got, sent.URL.RawQuery, want.path)
		}
		if got, signed := sent.Header.Get("Authorization"), signedAsSent(t, srv.URL, sent); got != signed {
			t.Fatalf("%s: Authorization %q, want %q (the path as sent, escaped once)", raw, got, signed)
		}
	}
	for _, raw := range []string{"s3://", "s3:///key", "s3://b?x/k", "s3://user@b/k", "s3://b:9000/k",
		"s3://b/\xff.ffr", "s3://b/" + strings.Repeat("k", maxS3KeySize+1)} {
		if _, err := c.Object(raw); !errors.Is(err, ErrBadURL) {
			t.Fatalf("%.40q: %v, want ErrBadURL", raw, err)
		}
	}
}

// signedAsSent is the SigV4 Authorization S3 expects for a request received as r.
func signedAsSent(t *testing.T, endpoint string, r *http.Request) string {
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, endpoint+r.URL.EscapedPath(), nil)
	req.Header.Set("X-Amz-Content-Sha256", emptyHash)
	s3 := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"}
	if err := s3.SignHTTP(context.Background(), creds, req, emptyHash, "s3", "us-east-1", when); err != nil {
		t.Fatal(err)
	}
	return req.Header.Get("Authorization")
}

// Locate tells URLs of objects from local paths, and resolves file:// URLs to their path.
func TestLocate(t *testing.T) {
	for _, c := range []struct {
		path, local string
		kind        PathKind
	}{
		{"S3://bucket/a.ffr", "S3://bucket/a.ffr", KindS3},
		{"https://host/a?b.ffr", "https://host/a?b.ffr", KindHTTP},
		{"Http://host/a", "Http://host/a", KindHTTP},
		{"s3:/bucket", "s3:/bucket", KindLocal}, // not a URL: a relative path
		{"file:///data/a%20b.ffr", "/data/a b.ffr", KindLocal},
		{"FILE://localhost/x%3Fy", "/x?y", KindLocal},
		{"data/a.ffr", "data/a.ffr", KindLocal},
	} {
		local, kind, err := Locate(c.path)
		if err != nil || local != c.local || kind != c.kind {
			t.Errorf("Locate(%q) = %q, %v, %v; want %q, %v", c.path, local, kind, err, c.local, c.kind)
		}
	}
	_, _, err := Locate("file://user:hunter2@host/x.ffr")
	if !errors.Is(err, ErrBadURL) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("a file URL of another host: %v, want ErrBadURL without the password", err)
	}
}
