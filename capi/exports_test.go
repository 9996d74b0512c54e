package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ffrecord/ffrecord/capi/internal/abi"
)

// buildLibrary builds the shared object into a temporary directory, as the Python package
// build does.
func buildLibrary(t *testing.T) string {
	t.Helper()
	lib := filepath.Join(t.TempDir(), "libffrecord.so")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", lib, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return lib
}

// TestExportsMatchHeader checks that the library exports exactly the functions that
// ffrecord.h declares (the C compiler already checks each signature).
func TestExportsMatchHeader(t *testing.T) {
	header, err := os.ReadFile("ffrecord.h")
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, m := range regexp.MustCompile(`(?m)^int32_t\s+(ffr_\w+)\(`).FindAllSubmatch(header, -1) {
		declared = append(declared, string(m[1]))
	}
	if len(declared) < 15 {
		t.Fatalf("found only %d declarations in ffrecord.h: %v", len(declared), declared)
	}
	out, err := exec.Command("nm", "-D", "--defined-only", buildLibrary(t)).Output()
	if err != nil {
		t.Fatal(err)
	}
	var exported []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 && strings.HasPrefix(f[2], "ffr_") {
			exported = append(exported, f[2])
		}
	}
	slices.Sort(declared)
	slices.Sort(exported)
	if !slices.Equal(declared, exported) {
		t.Errorf("header declares %v\nlibrary exports %v", declared, exported)
	}
}

// TestFromC compiles testdata/smoke.c against the header and the freshly built library
// and runs it: real C threads, real C memory, the real exported symbols.
func TestFromC(t *testing.T) {
	lib := buildLibrary(t)
	dir := filepath.Dir(lib)
	smoke := filepath.Join(dir, "smoke")
	cc := exec.Command("cc", "-std=c11", "-Wall", "-Werror", "-I.", "-o", smoke, "testdata/smoke.c",
		"-L"+dir, "-lffrecord", "-lpthread", "-Wl,-rpath,"+dir)
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	in := "../core/testdata/basic.ffr"
	out := filepath.Join(dir, "copy.ffr")
	run := exec.Command(smoke, abi.Version, in, out)
	var stderr bytes.Buffer
	run.Stderr = &stderr
	stdout, err := run.Output()
	if err != nil {
		t.Fatalf("smoke: %v\n%s%s", err, stdout, stderr.String())
	}
	for _, line := range []string{"version ok", "read 25 samples", "verify ok", "write ok", "per-thread errors ok", "handles ok", "errno ok"} {
		if !strings.Contains(string(stdout), line) {
			t.Errorf("output lacks %q:\n%s", line, stdout)
		}
	}
	// The reference implementation wrote basic.ffr: the same samples written through the
	// ABI must give the same bytes.
	want, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the copy differs from %s (%d bytes, want %d; %v)", in, len(got), len(want), err)
	}
}
