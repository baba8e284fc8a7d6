package trace

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mermaidParseScript parses the diagram in argv[2] with Mermaid's own parser.
const mermaidParseScript = `import mermaid from 'mermaid';
import fs from 'fs';
try {
  await mermaid.parse(fs.readFileSync(process.argv[2], 'utf8'));
} catch (e) { console.error(e.message || String(e)); process.exit(1); }
`

// mermaidParser returns a function that parses a diagram with the mermaid npm package,
// installed once into a directory below os.TempDir() that later runs reuse. It skips
// the test when node or npm is missing, the registry cannot be reached, or -short.
func mermaidParser(t *testing.T) func(src string) error {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not installing mermaid from npm")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm not installed")
	}
	dir := filepath.Join(os.TempDir(), "kubette-test-mermaid11")
	script := filepath.Join(dir, "parse.mjs")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "mermaid", "package.json")); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Skipf("mermaid dir: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", dir, "mermaid@11")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("npm install mermaid: %v: %s", err, out)
		}
	}
	if err := os.WriteFile(script, []byte(mermaidParseScript), 0o644); err != nil {
		t.Fatal(err)
	}
	return func(src string) error {
		f := filepath.Join(t.TempDir(), "diagram.mmd")
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			return err
		}
		out, err := exec.Command(node, script, f).CombinedOutput()
		if err != nil {
			return &mermaidError{msg: strings.TrimSpace(string(out))}
		}
		return nil
	}
}

type mermaidError struct{ msg string }

func (e *mermaidError) Error() string { return "mermaid: " + e.msg }

func TestMermaidParsesWithNPMMermaid(t *testing.T) {
	parse := mermaidParser(t)
	if err := parse("sequenceDiagram\n  a->>b: x\n  rect rgb(1,2,3)\n"); err == nil {
		t.Fatal("the parser accepted an unclosed rect with a bad colour: it checks nothing")
	}
	if err := parse(Mermaid(awkwardFlow())); err != nil {
		t.Errorf("escaped message text: %v", err)
	}
	in := Normalize(loadInput(t, "deployment.json"))
	for _, all := range []bool{false, true} {
		if err := parse(Mermaid(Build(in, Options{All: all}))); err != nil {
			t.Errorf("all=%v: %v", all, err)
		}
	}
}

// awkwardFlow has a participant and messages with characters Mermaid reads as syntax.
func awkwardFlow() Flow {
	return Build(Input{Events: []Event{
		{Component: "kubelet/node-1", Reason: "Failed", Message: `Error: "a;b" #1 <none> & more`},
		{Component: "my controller;x", Reason: "Note", Message: "#lt; is not an entity here"},
	}}, Options{})
}

func TestCheckMermaidAcceptsEscapedText(t *testing.T) {
	if err := CheckMermaid(Mermaid(awkwardFlow())); err != nil {
		t.Fatal(err)
	}
}

func TestCheckMermaidRejects(t *testing.T) {
	for name, src := range map[string]string{
		"header":     "graph TD\n",
		"undeclared": "sequenceDiagram\n    participant a\n    a->>b: x\n",
		"unclosed":   "sequenceDiagram\n    participant a\n    rect rgb(1, 2, 3)\n    a->>a: x\n",
		"stray end":  "sequenceDiagram\n    participant a\n    end\n",
		"semicolon":  "sequenceDiagram\n    participant a\n    a->>a: x; y\n",
		"arrow":      "sequenceDiagram\n    participant a\n    a=>a: x\n",
		"late":       "sequenceDiagram\n    participant a\n    a->>a: x\n    participant b\n",
	} {
		if err := CheckMermaid(src); err == nil {
			t.Errorf("%s: accepted %q", name, src)
		}
	}
}
