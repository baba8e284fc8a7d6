package trace

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// mermaidParseScript parses the diagram in argv[2] with Mermaid's own parser.
const mermaidParseScript = `import mermaid from 'mermaid';
import fs from 'fs';
try {
  await mermaid.parse(fs.readFileSync(process.argv[2], 'utf8'));
} catch (e) { console.error(e.message || String(e)); process.exit(1); }
`

// MermaidParser returns a function that parses a diagram with Mermaid's own parser (the
// mermaid npm package run by node), installing mermaid@11 into dir with npm unless a
// previous call did. It fails when node or npm is missing or the install fails; callers
// then fall back to CheckMermaid. Tests use it; kubette itself never runs node.
func MermaidParser(ctx context.Context, dir string) (func(src string) error, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("mermaid parser: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "mermaid", "package.json")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			return nil, fmt.Errorf("mermaid parser: %w", err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("mermaid parser: %w", err)
		}
		cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", dir, "mermaid@11")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("npm install mermaid: %w: %s", err, out)
		}
	}
	script := filepath.Join(dir, "parse.mjs")
	if err := os.WriteFile(script, []byte(mermaidParseScript), 0o644); err != nil {
		return nil, fmt.Errorf("mermaid parser: %w", err)
	}
	return func(src string) error {
		f, err := os.CreateTemp(dir, "diagram-*.mmd")
		if err != nil {
			return fmt.Errorf("mermaid parser: %w", err)
		}
		defer os.Remove(f.Name())
		if _, err := f.WriteString(src); err != nil {
			f.Close()
			return fmt.Errorf("mermaid parser: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("mermaid parser: %w", err)
		}
		out, err := exec.CommandContext(ctx, node, script, f.Name()).CombinedOutput()
		if err != nil {
			return fmt.Errorf("mermaid: %s", strings.TrimSpace(string(out)))
		}
		return nil
	}, nil
}
