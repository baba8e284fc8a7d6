package trace

import (
	"fmt"
	"html"
	"strings"
)

// ids gives each participant a Mermaid identifier made of letters, digits and '_'.
func ids(participants []string) map[string]string {
	out := map[string]string{}
	used := map[string]bool{}
	for _, p := range participants {
		var b strings.Builder
		for _, r := range p {
			if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				b.WriteRune(r)
			} else {
				b.WriteByte('_')
			}
		}
		id := b.String()
		if id == "" || id[0] >= '0' && id[0] <= '9' {
			id = "p_" + id
		}
		base := id
		for n := 2; used[id]; n++ {
			id = fmt.Sprintf("%s_%d", base, n)
		}
		used[id] = true
		out[p] = id
	}
	return out
}

// mermaidText escapes what Mermaid's sequence grammar would read as syntax in a message.
var mermaidText = strings.NewReplacer("#", "#35;", ";", "#59;", "<", "#lt;", ">", "#gt;", "\n", " ")

// phaseColours alternate behind consecutive phases.
var phaseColours = []string{"rgb(232, 242, 255)", "rgb(255, 245, 225)", "rgb(232, 250, 236)", "rgb(245, 235, 255)"}

// Mermaid renders a flow as a Mermaid sequenceDiagram: numbered messages, requests as
// solid arrows, watch notifications as async arrows (-)), decisions as notes and each
// control loop's phase in a rect.
func Mermaid(f Flow) string {
	var b strings.Builder
	b.WriteString("sequenceDiagram\n    autonumber\n")
	id := ids(f.Participants)
	for _, p := range f.Participants {
		if id[p] == p {
			fmt.Fprintf(&b, "    participant %s\n", p)
		} else {
			fmt.Fprintf(&b, "    participant %s as %s\n", id[p], mermaidText.Replace(p))
		}
	}
	for i, ph := range f.Phases {
		fmt.Fprintf(&b, "    rect %s\n", phaseColours[i%len(phaseColours)])
		for _, st := range ph.Steps {
			text := mermaidText.Replace(st.Text())
			switch st.Kind {
			case StepNote:
				fmt.Fprintf(&b, "        Note over %s: %s\n", id[st.From], text)
			case StepDelivery:
				fmt.Fprintf(&b, "        %s-)%s: %s\n", id[st.From], id[st.To], text)
			default:
				fmt.Fprintf(&b, "        %s->>%s: %s\n", id[st.From], id[st.To], text)
			}
		}
		b.WriteString("    end\n")
	}
	return b.String()
}

// Text renders a flow as a timeline, one phase after the other, with each step's time
// since the first; messages carry the numbers the diagrams give them.
func Text(f Flow) string {
	var b strings.Builder
	n := 0
	for _, ph := range f.Phases {
		fmt.Fprintf(&b, "── %s ──\n", ph.Owner)
		for _, st := range ph.Steps {
			at := st.Time.Sub(f.Start).Seconds()
			if st.Kind == StepNote {
				// Numbers are the diagrams' message numbers: notes have none.
				fmt.Fprintf(&b, "     +%.3fs  [%s] %s\n", at, st.From, st.Text())
				continue
			}
			n++
			switch st.Kind {
			case StepDelivery:
				fmt.Fprintf(&b, "%3d  +%.3fs  %s -) %s: %s\n", n, at, st.From, st.To, st.Text())
			default:
				fmt.Fprintf(&b, "%3d  +%.3fs  %s → %s: %s\n", n, at, st.From, st.To, st.Text())
			}
		}
	}
	return b.String()
}

// SVG layout, in pixels.
const (
	svgMargin   = 20
	svgColumn   = 230
	svgHeadH    = 36
	svgRow      = 34
	svgCharW    = 6.4 // average width of a character at the font size used
	svgFontSize = 12
)

// SVG renders a flow as a self-contained SVG sequence diagram (no scripts, fonts or
// links to fetch): participants with lifelines, numbered arrows (dashed with an open
// head for watch notifications), notes and a tinted band per phase.
func SVG(f Flow) string {
	col := map[string]int{}
	for i, p := range f.Participants {
		col[p] = i
	}
	x := func(p string) float64 { return float64(svgMargin + svgColumn/2 + col[p]*svgColumn) }
	rows := 0
	for _, ph := range f.Phases {
		rows += len(ph.Steps)
	}
	width := float64(2*svgMargin + len(f.Participants)*svgColumn)
	// Labels are centred between their participants: widen the canvas for long ones.
	for _, ph := range f.Phases {
		for _, st := range ph.Steps {
			mid := (x(st.From) + x(st.To)) / 2
			if end := mid + float64(len([]rune(st.Text())))*svgCharW/2 + svgMargin; end > width {
				width = end
			}
		}
	}
	height := float64(2*svgMargin + 2*svgHeadH + (rows+1)*svgRow)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="%d">`+"\n", width, height, width, height, svgFontSize)
	b.WriteString(`<defs><marker id="sync" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker>` +
		`<marker id="async" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto"><path d="M0,0 L10,5 L0,10" fill="none" stroke="#333"/></marker></defs>` + "\n")
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%.0f" height="%.0f" fill="white"/>`+"\n", width, height)
	top := float64(svgMargin + svgHeadH)
	bottom := height - svgMargin - svgHeadH
	// Phase bands first, so that everything else is drawn over them.
	y := top + svgRow/2
	for i, ph := range f.Phases {
		lo, hi := len(f.Participants), -1
		for _, st := range ph.Steps {
			for _, p := range []string{st.From, st.To} {
				lo, hi = min(lo, col[p]), max(hi, col[p])
			}
		}
		h := float64(len(ph.Steps)) * svgRow
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="%s"/>`+"\n",
			float64(svgMargin+lo*svgColumn+8), y, float64((hi-lo+1)*svgColumn-16), h, phaseColours[i%len(phaseColours)])
		y += h
	}
	for _, p := range f.Participants {
		px := x(p)
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#999" stroke-dasharray="4 3"/>`+"\n", px, top, px, bottom)
		for _, by := range []float64{svgMargin, bottom} {
			fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%d" height="%d" rx="4" fill="#eaeaff" stroke="#557"/>`+"\n", px-svgColumn/2+14, by, svgColumn-28, svgHeadH)
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle" font-weight="bold">%s</text>`+"\n", px, by+svgHeadH/2+4, html.EscapeString(p))
		}
	}
	y = top + svgRow/2
	n := 0
	for _, ph := range f.Phases {
		for _, st := range ph.Steps {
			mid := y + svgRow/2
			text := html.EscapeString(st.Text())
			if st.Kind == StepNote {
				w := float64(len([]rune(st.Text())))*svgCharW + 16
				fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%d" fill="#fff8c4" stroke="#aa3"/>`+"\n", x(st.From)-w/2, mid-11, w, 22)
				fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x(st.From), mid+4, text)
				y += svgRow
				continue
			}
			n++
			x1, x2 := x(st.From), x(st.To)
			dash, marker := "", "sync"
			if st.Kind == StepDelivery {
				dash, marker = ` stroke-dasharray="6 3"`, "async"
			}
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#333"%s marker-end="url(#%s)"/>`+"\n", x1, mid+6, x2, mid+6, dash, marker)
			fmt.Fprintf(&b, `<circle cx="%.0f" cy="%.0f" r="8" fill="#333"/><text x="%.0f" y="%.0f" text-anchor="middle" font-size="9" fill="white">%d</text>`+"\n", x1, mid+6, x1, mid+9, n)
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`+"\n", (x1+x2)/2, mid, text)
			y += svgRow
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
