package remote

import (
	"strings"
	"testing"
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
