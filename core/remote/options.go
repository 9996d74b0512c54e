package remote

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Defaults of Options.
const (
	DefaultConcurrency = 64
	DefaultTimeout     = 30 * time.Second
	DefaultRetries     = 5
	DefaultCoalesceGap = 1 << 20
	DefaultChunkSize   = 16 << 20
	// DefaultMergeGap: object storage bills a GET about what it bills 4 KiB of egress, so
	// reading a gap that small through costs no more than the request it saves: small
	// neighbouring values (a structured dataset's labels) cost one request, not one each,
	// and samples of more than 4 KiB are never read with their neighbours' bytes.
	DefaultMergeGap = 4 << 10
	// MaxConcurrency and MaxRetries bound those options: past any file descriptor limit,
	// and past weeks of retrying at the backoff's cap, a larger value is a mistake.
	MaxConcurrency = 1 << 16
	MaxRetries     = 1 << 16
)

// maxTimeoutSeconds is the longest timeout a time.Duration holds (about 292 years): a
// larger one means no deadline in practice, and is that.
const maxTimeoutSeconds = float64(math.MaxInt64 / time.Second)

// Options configure access to remote objects. The zero value means: the defaults above,
// the endpoint and region from the environment, credentials as the AWS SDKs find them.
type Options struct {
	// EndpointURL of an S3-compatible store (e.g. "http://127.0.0.1:9000"). Empty: the
	// environment's AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else AWS's regional endpoint.
	EndpointURL string `json:"endpoint_url"`
	// Region signed for. Empty: AWS_REGION, AWS_DEFAULT_REGION, the shared config, else
	// us-east-1.
	Region string `json:"region"`
	// Profile of the shared config and credentials files (empty: AWS_PROFILE or default).
	Profile string `json:"profile"`
	// Anonymous sends S3 requests unsigned (public buckets).
	Anonymous bool `json:"anonymous"`
	// VirtualHosted addresses buckets as bucket.endpoint instead of endpoint/bucket. The
	// default is path-style for a custom endpoint and virtual-hosted for AWS.
	VirtualHosted *bool `json:"virtual_hosted"`
	// Concurrency bounds the requests in flight per client (0: DefaultConcurrency).
	Concurrency int `json:"concurrency"`
	// Timeout is each request's deadline in seconds (0: DefaultTimeout; past what a
	// time.Duration holds, about 292 years: that longest one).
	Timeout float64 `json:"timeout"`
	// CoalesceGap is the widest gap, in bytes, read through to join two range requests
	// when a batch needs more requests than Concurrency (0: DefaultCoalesceGap; -1: never).
	CoalesceGap int64 `json:"coalesce_gap"`
	// MergeGap is the widest gap read through to join two range requests whatever the
	// batch's size: the bytes wasted per request saved (0: DefaultMergeGap; -1: never).
	MergeGap int64 `json:"merge_gap"`
	// Retries is how many times a failed request is tried again (-1: never; 0: the
	// default).
	Retries int `json:"retries"`
	// CacheDir keeps downloaded headers, keyed by URL, ETag and size, so that the
	// processes of a job download a large header once. Empty: FFRECORD_CACHE_DIR, else no
	// cache.
	CacheDir string `json:"cache_dir"`
	// CacheLimit bounds the bytes of chunks kept in CacheDir (0: FFRECORD_CACHE_LIMIT, else
	// no limit); the least recently used chunks not in use are evicted to stay under it.
	CacheLimit int64 `json:"cache_limit"`
	// ChunkSize is the bytes of consecutive samples the cache fetches with one request
	// (0: DefaultChunkSize); a larger sample is a chunk of its own.
	ChunkSize int64 `json:"chunk_size"`
	// Versions pins objects, by URL, to the size and ETag another reader of the same job
	// found (a data loader's worker, an unpickled copy: ffr_reader_versions there). Opening
	// a pinned object makes no request; every read of it is conditional on that ETag, so an
	// object replaced since is ErrChanged at the first request, never read as the new one.
	Versions map[string]Version `json:"versions"`
	// Env holds environment variables that take precedence over the process's: a Go
	// runtime in a shared library sees the environment the process started with, so a
	// host that changed its own (Python's os.environ) passes the variables here.
	Env map[string]string `json:"env"`
}

// ParseOptions reads options from JSON (an object with the fields' JSON names; "" or
// "{}" for the defaults) and fills in the environment's defaults. Unknown fields are an
// error, so that a misspelt option is not silently ignored.
func ParseOptions(text string) (Options, error) {
	o, err := decodeOptions(text, true)
	if err != nil {
		return o, err
	}
	return o, o.withDefaults()
}

// CheckOptions reports why text is not storage options a user may give: an unknown name,
// or a value not of its option's JSON type. Env is not one of them: it is the host's
// channel for its environment. Nothing is read from the environment.
func CheckOptions(text string) error {
	_, err := decodeOptions(text, false)
	return err
}

// optionNames are the JSON names of the fields of Options, Env aside.
var optionNames = func() []string {
	t := reflect.TypeOf(Options{})
	names := make([]string, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		if name := t.Field(i).Tag.Get("json"); name != "env" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}()

// decodeOptions reads options from JSON, every name known (env too when withEnv) and
// every value of its field's type.
func decodeOptions(text string, withEnv bool) (Options, error) {
	var o Options
	if text == "" {
		return o, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &fields); err != nil {
		return o, optionsError(err)
	}
	var unknown []string
	for name := range fields {
		if !(withEnv && name == "env") && !slices.Contains(optionNames, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return o, fmt.Errorf("unknown storage options %q; known: %s", unknown, strings.Join(optionNames, ", "))
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return o, optionsError(err)
	}
	return o, nil
}

// optionsError describes why options did not parse without quoting them: they carry the
// environment's AWS_* variables, secrets among them, and a value given for the wrong option
// may be one too. Only option names and JSON types are named.
func optionsError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		kind, _, _ := strings.Cut(typeErr.Value, " ") // "number 1.5": the type, not the value
		return fmt.Errorf("storage option %s must be a JSON %s, not a %s", typeErr.Field, jsonKind(typeErr.Type), kind)
	case errors.As(err, &syntaxErr):
		return fmt.Errorf("storage options are not valid JSON (at byte %d)", syntaxErr.Offset)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf("storage options: %w", err) // names the field only
	}
	return errors.New("storage options are not a JSON object of options")
}

// jsonKind is what JSON value a Go type is read from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64:
		return "integer"
	case reflect.Float64:
		return "number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "object"
}

func (o *Options) withDefaults() error {
	if o.EndpointURL == "" {
		o.EndpointURL = o.getenv("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	}
	if o.CacheDir == "" {
		o.CacheDir = o.getenv("FFRECORD_CACHE_DIR")
	}
	if o.CacheLimit == 0 {
		if v := o.getenv("FFRECORD_CACHE_LIMIT"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return fmt.Errorf("FFRECORD_CACHE_LIMIT=%q is not a byte count", v)
			}
			o.CacheLimit = n
		}
	}
	if o.ChunkSize == 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
		if v := o.getenv("FFRECORD_REMOTE_CONCURRENCY"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fmt.Errorf("FFRECORD_REMOTE_CONCURRENCY=%q is not a positive integer", v)
			}
			o.Concurrency = n
		}
	}
	switch {
	case o.Concurrency < 1:
		return fmt.Errorf("storage option concurrency %d is not positive", o.Concurrency)
	case o.Concurrency > MaxConcurrency:
		return fmt.Errorf("storage option concurrency %d is over %d", o.Concurrency, MaxConcurrency)
	case o.CacheLimit < 0:
		return fmt.Errorf("storage option cache_limit %d is negative", o.CacheLimit)
	case o.ChunkSize < 1:
		return fmt.Errorf("storage option chunk_size %d is not positive", o.ChunkSize)
	case math.IsNaN(o.Timeout) || math.IsInf(o.Timeout, 0):
		return fmt.Errorf("storage option timeout %g is not a finite number", o.Timeout)
	case o.Timeout < 0:
		return fmt.Errorf("storage option timeout %g is negative", o.Timeout)
	case o.CoalesceGap < -1:
		return fmt.Errorf("storage option coalesce_gap %d is below -1", o.CoalesceGap)
	case o.MergeGap < -1:
		return fmt.Errorf("storage option merge_gap %d is below -1", o.MergeGap)
	case o.Retries < -1:
		return fmt.Errorf("storage option retries %d is below -1", o.Retries)
	case o.Retries > MaxRetries:
		return fmt.Errorf("storage option retries %d is over %d", o.Retries, MaxRetries)
	}
	return nil
}

func (o *Options) timeout() time.Duration {
	switch {
	case o.Timeout == 0:
		return DefaultTimeout
	case o.Timeout >= maxTimeoutSeconds: // converted, it would overflow to a past deadline
		return math.MaxInt64
	}
	return time.Duration(o.Timeout * float64(time.Second))
}

func (o *Options) coalesceGap() int64 { return gap(o.CoalesceGap, DefaultCoalesceGap) }

func (o *Options) mergeGap() int64 { return gap(o.MergeGap, DefaultMergeGap) }

// gap reads a gap option: 0 is the default, -1 never (no gap).
func gap(option, byDefault int64) int64 {
	switch option {
	case 0:
		return byDefault
	case -1:
		return 0
	}
	return option
}

func (o *Options) retries() int {
	switch o.Retries {
	case 0:
		return DefaultRetries
	case -1:
		return 0
	}
	return o.Retries
}

// key identifies options that can share one client (and its connections).
func (o *Options) key() string {
	shared := *o
	shared.Versions = nil // which objects are pinned does not configure the client
	b, _ := json.Marshal(&shared)
	return string(b)
}

// Version is what identifies one version of an object: its size and ETag.
type Version struct {
	Size int64  `json:"size"`
	ETag string `json:"etag"`
}

// getenv is the first of the variables that is set and not empty, from Env first.
func (o *Options) getenv(names ...string) string {
	for _, n := range names {
		if v, ok := o.Env[n]; ok && v != "" {
			return v
		}
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}
