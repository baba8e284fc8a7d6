package trace

import "fmt"

// Formats returns the names Renderer accepts, the default first.
func Formats() []string { return []string{"mermaid", "text", "svg"} }

// Renderer returns the renderer of a format: mermaid, text or svg.
func Renderer(format string) (func(Flow) string, error) {
	switch format {
	case "mermaid":
		return Mermaid, nil
	case "text":
		return Text, nil
	case "svg":
		return SVG, nil
	}
	return nil, fmt.Errorf("format %q: want mermaid, text or svg", format)
}

// DrawOptions say how Draw renders a flow.
type DrawOptions struct {
	// Format is mermaid (default), text or svg.
	Format string
	// All keeps every record and folds nothing (see Options.All).
	All bool
	// Normalize replaces generated names, UIDs, times and revisions by stable ones.
	Normalize bool
}

// Draw renders what Collect gathered: the one path from an Input to a diagram, shared
// by `kubette trace` and the API server's /ui/ page.
func Draw(in Input, opts DrawOptions) (string, error) {
	if opts.Format == "" {
		opts.Format = "mermaid"
	}
	render, err := Renderer(opts.Format)
	if err != nil {
		return "", err
	}
	if opts.Normalize {
		in = Normalize(in)
	}
	return render(Build(in, Options{All: opts.All})), nil
}
