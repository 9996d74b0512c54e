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
