// Package golden compares a test's output with a file it keeps under testdata, and rewrites
// that file instead when the test binary runs with -update. Every golden-file test of the
// project goes through it, so each has the same flag, the same messages and the same diff:
//
//	go test ./internal/proxy/iptables -run TestRenderGolden -update
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// update is the -update flag of every test binary that imports this package. It is read,
// never written, after flag parsing.
var update = flag.Bool("update", false, "rewrite the golden files under testdata from the current output")

// Updating reports whether the test binary runs with -update, for tests that write their
// golden files some other way than Check.
func Updating() bool { return *update }

// Check compares got with the file at path. With -update it writes got to path (making its
// directory) and passes; otherwise a missing file fails the test with the command that
// creates it, and a different one fails it with the lines that differ.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("golden: %v", err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("golden: %v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden: %v (go test -run '%s' -update writes it)", err, rootName(t))
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (go test -run '%s' -update rewrites it, after checking the change):\n%s",
			path, rootName(t), LineDiff(string(want), string(got)))
	}
}

// LineDiff lists, line by line, where got differs from want: the line number, the wanted
// line after "-" and the line got after "+". Empty when the two are equal.
func LineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  - " + wl + "\n  + " + gl + "\n")
		}
	}
	return b.String()
}

// rootName is the top-level test's name, the pattern for -run.
func rootName(t testing.TB) string {
	name, _, _ := strings.Cut(t.Name(), "/")
	return "^" + name + "$"
}
