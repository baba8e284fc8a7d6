package trace

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata (go test ./internal/trace -run Golden -update)")

func loadInput(t *testing.T, name string) Input {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var in Input
	if err := json.Unmarshal(data, &in); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return in
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to accept):\n%s", name, lineDiff(string(want), got))
	}
}

// lineDiff lists the lines that differ between want and got.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + itoa(i+1) + ":\n  - " + wl + "\n  + " + gl + "\n")
		}
	}
	return b.String()
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestGolden(t *testing.T) {
	in := Normalize(loadInput(t, "deployment.json"))
	for _, all := range []bool{false, true} {
		suffix := ""
		if all {
			suffix = ".all"
		}
		f := Build(in, Options{All: all})
		m := Mermaid(f)
		if err := CheckMermaid(m); err != nil {
			t.Errorf("mermaid%s: %v", suffix, err)
		}
		golden(t, "deployment"+suffix+".mmd", m)
		golden(t, "deployment"+suffix+".txt", Text(f))
		golden(t, "deployment"+suffix+".svg", SVG(f))
	}
}
