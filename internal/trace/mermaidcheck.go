package trace

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	mmParticipant = regexp.MustCompile(`^participant ([A-Za-z_][A-Za-z0-9_]*)(?: as (.+))?$`)
	mmMessage     = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)(-->>|->>|--\)|-\)|-->|->|--x|-x)([A-Za-z_][A-Za-z0-9_]*): (.+)$`)
	mmNote        = regexp.MustCompile(`^Note (over|left of|right of) ([A-Za-z_][A-Za-z0-9_]*)(?:,([A-Za-z_][A-Za-z0-9_]*))?: (.+)$`)
	mmRect        = regexp.MustCompile(`^rect (rgba?\(\s*\d+\s*,\s*\d+\s*,\s*\d+\s*(,\s*[0-9.]+\s*)?\)|[a-z]+)$`)
	mmEntity      = regexp.MustCompile(`#[A-Za-z0-9]+;`)
)

// CheckMermaid checks a diagram against the subset of Mermaid's sequenceDiagram grammar
// that Mermaid renders: the header, participants declared once before use, well-formed
// arrows and notes, rect blocks closed by end, and message texts free of the characters
// the grammar reads as syntax (';', a '#' that starts no entity, '<', '>').
func CheckMermaid(src string) error {
	lines := strings.Split(strings.TrimRight(src, "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "sequenceDiagram" {
		return fmt.Errorf("line 1: want sequenceDiagram")
	}
	declared := map[string]bool{}
	depth := 0
	checkText := func(n int, text string) error {
		bare := mmEntity.ReplaceAllString(text, "")
		if i := strings.IndexAny(bare, ";#<>"); i >= 0 {
			return fmt.Errorf("line %d: %q in message text %q", n, bare[i], text)
		}
		return nil
	}
	use := func(n int, ids ...string) error {
		for _, id := range ids {
			if id != "" && !declared[id] {
				return fmt.Errorf("line %d: participant %q not declared", n, id)
			}
		}
		return nil
	}
	started := false // messages have begun: participants must come first
	for i, raw := range lines[1:] {
		n := i + 2
		l := strings.TrimSpace(raw)
		switch {
		case l == "" || strings.HasPrefix(l, "%%"):
		case l == "autonumber":
			if started {
				return fmt.Errorf("line %d: autonumber after messages", n)
			}
		case mmParticipant.MatchString(l):
			m := mmParticipant.FindStringSubmatch(l)
			if started {
				return fmt.Errorf("line %d: participant %s declared after messages", n, m[1])
			}
			if declared[m[1]] {
				return fmt.Errorf("line %d: participant %s declared twice", n, m[1])
			}
			declared[m[1]] = true
			if m[2] != "" {
				if err := checkText(n, m[2]); err != nil {
					return err
				}
			}
		case mmRect.MatchString(l):
			started = true
			depth++
		case l == "end":
			if depth == 0 {
				return fmt.Errorf("line %d: end without a block", n)
			}
			depth--
		case mmMessage.MatchString(l):
			started = true
			m := mmMessage.FindStringSubmatch(l)
			if err := use(n, m[1], m[3]); err != nil {
				return err
			}
			if err := checkText(n, m[4]); err != nil {
				return err
			}
		case mmNote.MatchString(l):
			started = true
			m := mmNote.FindStringSubmatch(l)
			if err := use(n, m[2], m[3]); err != nil {
				return err
			}
			if err := checkText(n, m[4]); err != nil {
				return err
			}
		default:
			return fmt.Errorf("line %d: not part of the sequenceDiagram grammar: %q", n, l)
		}
	}
	if depth != 0 {
		return fmt.Errorf("%d block(s) not closed by end", depth)
	}
	return nil
}
