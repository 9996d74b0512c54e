package remote

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Options carry the environment's AWS_* variables: a message about bad options names
// option names and JSON types, never a value.
func TestBadOptionsQuoteNoValue(t *testing.T) {
	const secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	env := `"env": {"AWS_SECRET_ACCESS_KEY": "` + secret + `"}`
	for text, want := range map[string]string{
		`{"timeout": "5", ` + env + `}`:                     "storage option timeout must be a JSON number, not a string",
		`{"retries": 1.5, ` + env + `}`:                     "storage option retries must be a JSON integer, not a number",
		`{"virtual_hosted": "` + secret + `", ` + env + `}`: "storage option virtual_hosted must be a JSON boolean, not a string",
		`{"region": 5, ` + env + `}`:                        "storage option region must be a JSON string, not a number",
		`{"timeout": 5 ` + env + `}`:                        "storage options are not valid JSON",
		`["` + secret + `"]`:                                "storage option",
		`{"env": {"AWS_SECRET_ACCESS_KEY": 5}}`:             "storage option env must be a JSON string, not a number",
	} {
		_, err := ParseOptions(text)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), secret[:8]) {
			t.Fatalf("%.30s…: %v, want %q and no secret", text, err, want)
		}
	}
}

// CheckOptions judges what a user gives: every name an option's (env is the host's), every
// value of its option's type, nothing read from the environment.
func TestCheckOptions(t *testing.T) {
	t.Setenv("FFRECORD_CACHE_LIMIT", "not a number") // ParseOptions would refuse it
	for text, want := range map[string]string{
		`{"endpoint_url": "http://127.0.0.1:9000", "chunk_size": 4096}`: "",
		`{}`:                           "",
		`{"endpoint": "x", "b": 1}`:    `unknown storage options ["b" "endpoint"]; known: anonymous, cache_dir`,
		`{"env": {"AWS_REGION": "x"}}`: `unknown storage options ["env"]`,
		`{"timeout": "hunter2"}`:       "storage option timeout must be a JSON number, not a string",
		`{"region": "x"`:               "storage options are not valid JSON",
	} {
		err := CheckOptions(text)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) ||
			err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("CheckOptions(%s) = %v, want %q", text, err, want)
		}
	}
	if _, err := ParseOptions(`{"env": {"AWS_REGION": "x"}, "regoin": "y"}`); err == nil ||
		!strings.Contains(err.Error(), `unknown storage options ["regoin"]`) {
		t.Fatalf("ParseOptions: %v, want the unknown option named", err)
	}
}

// Numeric options out of their range are refused by name; a timeout longer than a
// time.Duration holds is the longest one, never an overflow to a deadline in the past
// (timeout 1e10 failed every request at once with "context deadline exceeded").
func TestNumericOptionsOutOfRange(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Timeout: math.NaN()}, "storage option timeout NaN is not a finite number"},
		{Options{Timeout: math.Inf(1)}, "storage option timeout +Inf is not a finite number"},
		{Options{Timeout: math.Inf(-1)}, "storage option timeout -Inf is not a finite number"},
		{Options{Timeout: -0.5}, "storage option timeout -0.5 is negative"},
		{Options{Concurrency: MaxConcurrency + 1}, "storage option concurrency 65537 is over 65536"},
		{Options{Concurrency: -3}, "storage option concurrency -3 is not positive"},
		{Options{Retries: MaxRetries + 1}, "storage option retries 65537 is over 65536"},
		{Options{Retries: -2}, "storage option retries -2 is below -1"},
		{Options{CacheLimit: -1}, "storage option cache_limit -1 is negative"},
		{Options{ChunkSize: -1}, "storage option chunk_size -1 is not positive"},
		{Options{MergeGap: -2}, "storage option merge_gap -2 is below -1"},
		{Options{CoalesceGap: math.MinInt64}, "storage option coalesce_gap -9223372036854775808 is below -1"},
	} {
		if err := c.opts.withDefaults(); err == nil || err.Error() != c.want {
			t.Errorf("%+v: %v, want %q", c.opts, err, c.want)
		}
	}
	for _, seconds := range []float64{1e10, 1e300, math.MaxFloat64, maxTimeoutSeconds} {
		o := Options{Timeout: seconds}
		if err := o.withDefaults(); err != nil || o.timeout() != math.MaxInt64 {
			t.Errorf("timeout %g: %v, %v; want the longest duration", seconds, err, o.timeout())
		}
	}
	for seconds, want := range map[float64]time.Duration{0: DefaultTimeout, 0.25: 250 * time.Millisecond, 1e9: 1e9 * time.Second} {
		if o := (Options{Timeout: seconds}); o.timeout() != want {
			t.Errorf("timeout %g: %v, want %v", seconds, o.timeout(), want)
		}
	}
}

// A request under the longest timeout is answered (timeout 1e10 once expired at once).
func TestAVeryLongTimeoutLetsRequestsThrough(t *testing.T) {
	data := pattern(4096)
	srv := newFakeServer(t, data)
	o, err := testClient(t, Options{Timeout: 1e10, Retries: -1}).Object(srv.URL + "/obj")
	if err != nil {
		t.Fatal(err)
	}
	if err := readSpans(t, o, data, []int{0, 1000}, []int{10, 96}); err != nil {
		t.Fatalf("a read under timeout 1e10: %v", err)
	}
}
