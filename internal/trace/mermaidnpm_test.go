package trace

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// mermaidParser returns Mermaid's own parser (MermaidParser), installed once into a
// directory below os.TempDir() that later runs reuse. It skips the test when node or npm
// is missing, the registry cannot be reached, or -short.
func mermaidParser(t *testing.T) func(src string) error {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not installing mermaid from npm")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	parse, err := MermaidParser(ctx, filepath.Join(os.TempDir(), "kubette-test-mermaid11"))
	if err != nil {
		t.Skip(err)
	}
	return parse
}

func TestMermaidParsesWithNPMMermaid(t *testing.T) {
	parse := mermaidParser(t)
	if err := parse("sequenceDiagram\n  a->>b: x\n  rect rgb(1,2,3)\n"); err == nil {
		t.Fatal("the parser accepted an unclosed rect with a bad colour: it checks nothing")
	}
	if err := parse(Mermaid(awkwardFlow())); err != nil {
		t.Errorf("escaped message text: %v", err)
	}
	for _, fixture := range goldenFixtures {
		in := Normalize(loadInput(t, fixture+".json"))
		for _, all := range []bool{false, true} {
			if err := parse(Mermaid(Build(in, Options{All: all}))); err != nil {
				t.Errorf("%s all=%v: %v", fixture, all, err)
			}
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
