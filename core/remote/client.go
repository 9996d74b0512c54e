package remote

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// Client sends the requests of one set of Options. Clients are shared (see For): one
// per distinct Options in a process, so that every reader of a store reuses the same
// keep-alive connections. A Client is safe for concurrent use.
type Client struct {
	opts          Options
	http          *http.Client
	slots         chan struct{} // bounds the requests in flight
	endpoint      *url.URL
	virtualHosted bool
	signer        *v4.Signer

	awsOnce sync.Once // loads region and credentials on the first S3 request
	region  string
	creds   aws.CredentialsProvider
	awsErr  error
}

var (
	clientsMu sync.Mutex
	clients   = map[string]*Client{}
)

// For returns the shared client of opts, the environment's defaults filled in.
func For(opts Options) (*Client, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	key := opts.key()
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c, ok := clients[key]; ok {
		return c, nil
	}
	c, err := newClient(opts)
	if err != nil {
		return nil, err
	}
	clients[key] = c
	return c, nil
}

func newClient(opts Options) (*Client, error) {
	if opts.Concurrency < 1 {
		return nil, fmt.Errorf("concurrency %d is not positive", opts.Concurrency)
	}
	// S3 signs the path escaped once, as sent (other AWS services escape it twice).
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	c := &Client{opts: opts, slots: make(chan struct{}, opts.Concurrency), signer: signer}
	endpoint := opts.EndpointURL
	custom := endpoint != ""
	if !custom {
		endpoint = "https://s3.amazonaws.com"
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: endpoint %q is not an http(s) URL", ErrBadURL, withoutUserinfo(endpoint))
	}
	c.endpoint = u
	c.virtualHosted = !custom
	if opts.VirtualHosted != nil {
		c.virtualHosted = *opts.VirtualHosted
	}
	dialer := &net.Dialer{Timeout: min(opts.timeout(), 10*time.Second), KeepAlive: 30 * time.Second}
	c.http = &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		MaxIdleConns:          4 * opts.Concurrency,
		MaxIdleConnsPerHost:   opts.Concurrency,
		IdleConnTimeout:       60 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: opts.timeout(),
		ForceAttemptHTTP2:     false, // many parallel HTTP/1.1 streams beat one HTTP/2 connection here
		DisableCompression:    true,  // ranges are of stored bytes
		ReadBufferSize:        64 << 10,
	}}
	return c, nil
}

// withoutUserinfo is a URL for messages: credentials written into it ("user:password@")
// are left out, and so is all of a text that does not parse as a URL.
func withoutUserinfo(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	return u.String()
}

// CloseIdle closes the idle connections of every client (for leak checks and tests).
func CloseIdle() {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	for _, c := range clients {
		c.http.CloseIdleConnections()
	}
}

// loadAWS finds the region and credentials, once. The EC2 metadata service is not
// asked: off EC2 it costs seconds of timeouts per process.
func (c *Client) loadAWS(ctx context.Context) error {
	c.awsOnce.Do(func() {
		if c.opts.Anonymous {
			c.region = c.opts.Region
			if c.region == "" {
				c.region = "us-east-1"
			}
			return
		}
		cfg, err := config.LoadDefaultConfig(ctx, c.awsLoadOptions()...)
		if err != nil {
			c.awsErr = fmt.Errorf("loading AWS configuration: %w", err)
			return
		}
		c.region, c.creds = cfg.Region, cfg.Credentials
		if c.region == "" {
			c.region = "us-east-1"
		}
	})
	return c.awsErr
}

// awsLoadOptions are the options and variables of Env made explicit for the SDK's
// loader, which itself reads only the process's startup environment.
func (c *Client) awsLoadOptions() []func(*config.LoadOptions) error {
	o := &c.opts
	load := []func(*config.LoadOptions) error{
		config.WithEC2IMDSClientEnableState(imds.ClientDisabled),
	}
	if region := cmp.Or(o.Region, o.getenv("AWS_REGION", "AWS_DEFAULT_REGION")); region != "" {
		load = append(load, config.WithRegion(region))
	}
	if profile := cmp.Or(o.Profile, o.getenv("AWS_PROFILE")); profile != "" {
		load = append(load, config.WithSharedConfigProfile(profile))
	}
	if file := o.getenv("AWS_CONFIG_FILE"); file != "" {
		load = append(load, config.WithSharedConfigFiles([]string{file}))
	}
	if file := o.getenv("AWS_SHARED_CREDENTIALS_FILE"); file != "" {
		load = append(load, config.WithSharedCredentialsFiles([]string{file}))
	}
	id, secret := o.getenv("AWS_ACCESS_KEY_ID"), o.getenv("AWS_SECRET_ACCESS_KEY")
	if id != "" && secret != "" && o.Profile == "" {
		load = append(load, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(id, secret, o.getenv("AWS_SESSION_TOKEN"))))
	}
	return load
}

// emptyHash is the SHA-256 of an empty payload.
const emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// unsignedPayload lets an upload's body go unhashed (S3 allows it; the part's
// Content-MD5-free integrity is TCP's and TLS's, its completion is checked by ETag).
const unsignedPayload = "UNSIGNED-PAYLOAD"

// sign signs an S3 request (a no-op for anonymous access and plain HTTP).
func (c *Client) sign(ctx context.Context, req *http.Request, loc *location, payloadHash string) error {
	if !loc.s3 {
		return nil
	}
	if err := c.loadAWS(ctx); err != nil {
		return err
	}
	if c.opts.Anonymous {
		return nil
	}
	if c.creds == nil {
		return fmt.Errorf("no AWS credentials found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, or anonymous access)")
	}
	creds, err := c.creds.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("AWS credentials: %w", err)
	}
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	return c.signer.SignHTTP(ctx, creds, req, payloadHash, "s3", c.region, time.Now())
}

// Stat returns an object's size and ETag.
func (c *Client) Stat(raw string) (size int64, etag string, err error) {
	loc, err := c.locate(raw)
	if err != nil {
		return 0, "", err
	}
	err = c.do(context.Background(), "HEAD", loc, func(ctx context.Context) (*http.Request, error) {
		return c.request(ctx, http.MethodHead, loc, loc.url, nil, emptyHash)
	}, func(resp *http.Response) error {
		size, etag = resp.ContentLength, trimETag(resp.Header.Get("ETag"))
		if size < 0 {
			return fmt.Errorf("no Content-Length in the answer")
		}
		return nil
	})
	return size, etag, err
}

// trimETag is an ETag header without its quotes.
func trimETag(header string) string { return strings.Trim(header, `"`) }

// request builds a signed request.
func (c *Client) request(ctx context.Context, method string, loc *location, target string, body []byte, payloadHash string) (*http.Request, error) {
	var req *http.Request
	var err error
	if body != nil {
		req, err = http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
		if err == nil {
			req.ContentLength = int64(len(body))
		}
	} else {
		req, err = http.NewRequestWithContext(ctx, method, target, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	return req, c.sign(ctx, req, loc, payloadHash)
}
