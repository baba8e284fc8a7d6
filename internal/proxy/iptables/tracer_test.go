package iptables

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// tracer follows a packet through rendered iptables-restore text, the way the
// kernel would walk the chains, enumerating both outcomes of every
// -m statistic and -m recent --rcheck match. It knows exactly the matches and
// targets the renderer uses and fails on anything else.
type tracer struct {
	// tables maps table → chain → rules (tokens after "-A CHAIN").
	tables map[string]map[string][][]string
	// local are the addresses -m addrtype --dst-type LOCAL matches.
	local map[netip.Addr]bool
}

// packet is what is traced.
type packet struct {
	src, dst netip.Addr
	proto    string
	dport    int
}

// outcome is one way a packet can go through a table.
type outcome struct {
	verdict string // DNAT, REJECT, ACCEPT, DROP, or "" (fell through)
	to      netip.AddrPort
	reject  string // --reject-with
	mark    uint32
	dnat    bool // conntrack state DNAT (set by the nat pass)
	weight  float64
	path    []string
	ret     bool
}

func parseRestore(text []byte) (map[string]map[string][][]string, error) {
	tables := map[string]map[string][][]string{}
	var cur map[string][][]string
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			cur = map[string][][]string{}
			tables[line[1:]] = cur
		case line == "COMMIT":
			cur = nil
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			if _, dup := cur[name]; dup {
				return nil, fmt.Errorf("chain %s declared twice", name)
			}
			cur[name] = nil
		case strings.HasPrefix(line, "-X "):
			delete(cur, strings.TrimPrefix(line, "-X "))
		case strings.HasPrefix(line, "-A "):
			toks, err := tokenize(line)
			if err != nil {
				return nil, err
			}
			chain := toks[1]
			if _, ok := cur[chain]; !ok {
				return nil, fmt.Errorf("rule appended to undeclared chain %s: %s", chain, line)
			}
			cur[chain] = append(cur[chain], toks[2:])
		default:
			return nil, fmt.Errorf("unexpected line %q", line)
		}
	}
	return tables, nil
}

func tokenize(line string) ([]string, error) {
	var out []string
	for i := 0; i < len(line); {
		switch {
		case line[i] == ' ':
			i++
		case line[i] == '"':
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 {
				return nil, fmt.Errorf("unterminated quote in %q", line)
			}
			out = append(out, line[i+1:i+1+j])
			i += j + 2
		default:
			j := strings.IndexByte(line[i:], ' ')
			if j < 0 {
				j = len(line) - i
			}
			out = append(out, line[i:i+j])
			i += j
		}
	}
	return out, nil
}

var builtinTargets = map[string]bool{"ACCEPT": true, "DROP": true, "REJECT": true, "RETURN": true, "DNAT": true, "MARK": true, "MASQUERADE": true}

// checkJumps reports every jump to a chain that does not exist in its table.
func (tr *tracer) checkJumps() error {
	for tn, chains := range tr.tables {
		for cn, rules := range chains {
			for _, r := range rules {
				for i := 0; i+1 < len(r); i++ {
					if r[i] == "-j" && !builtinTargets[r[i+1]] {
						if _, ok := chains[r[i+1]]; !ok {
							return fmt.Errorf("%s %s jumps to missing chain %s", tn, cn, r[i+1])
						}
					}
				}
			}
		}
	}
	return nil
}

// trace runs p through the nat chain natStart (as the PREROUTING/OUTPUT hook
// does), then each outcome through the filter chains filterStarts in order (as
// the FORWARD/OUTPUT/INPUT hooks do, the guard first). It returns the final
// outcomes: DNAT (with the filter verdict ACCEPT or fall-through turned into
// DNAT), REJECT, or "" for a packet left alone.
func (tr *tracer) trace(p packet, natStart string, filterStarts ...string) ([]outcome, error) {
	nat, err := tr.walk("nat", natStart, p, outcome{weight: 1}, 0)
	if err != nil {
		return nil, err
	}
	var out []outcome
	for _, o := range nat {
		q := p
		if o.verdict == "DNAT" {
			q.dst = o.to.Addr()
			q.dport = int(o.to.Port())
			o.dnat = true
		}
		states := []outcome{o}
		for _, fs := range filterStarts {
			var next []outcome
			for _, s := range states {
				if s.verdict == "REJECT" || s.verdict == "DROP" {
					next = append(next, s)
					continue
				}
				fo, err := tr.walk("filter", fs, q, s, 0)
				if err != nil {
					return nil, err
				}
				next = append(next, fo...)
			}
			states = next
		}
		for _, s := range states {
			if s.verdict == "ACCEPT" && s.dnat {
				s.verdict = "DNAT"
			}
			out = append(out, s)
		}
	}
	return out, nil
}

func (tr *tracer) walk(table, chain string, p packet, st outcome, depth int) ([]outcome, error) {
	if depth > 20 {
		return nil, fmt.Errorf("jump depth > 20 at %s", chain)
	}
	rules, ok := tr.tables[table][chain]
	if !ok {
		return nil, fmt.Errorf("%s: jump to missing chain %s", table, chain)
	}
	st.path = append(append([]string(nil), st.path...), chain)
	cur := []outcome{st}
	var done, returned []outcome
	for _, r := range rules {
		var next []outcome
		for _, s := range cur {
			m, pMatch, err := tr.match(r, p, s)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", table, chain, err)
			}
			if !m {
				next = append(next, s)
				continue
			}
			hit := s
			if pMatch < 1 {
				miss := s
				miss.weight *= 1 - pMatch
				next = append(next, miss)
				hit.weight *= pMatch
			}
			outs, err := tr.target(table, r, p, hit, depth)
			if err != nil {
				return nil, err
			}
			for _, o := range outs {
				switch {
				case o.ret:
					o.ret = false
					returned = append(returned, o)
				case o.verdict != "":
					done = append(done, o)
				default:
					next = append(next, o)
				}
			}
		}
		cur = next
	}
	return append(append(done, returned...), cur...), nil
}

// match reports whether rule r matches, and with which probability (1 for a
// certain match; statistic matches give their probability; an -m recent
// --rcheck is enumerated with probability 0, i.e. a client without affinity
// state, so that weights stay those of the random choice).
func (tr *tracer) match(r []string, p packet, s outcome) (bool, float64, error) {
	prob := 1.0
	neg := false
	for i := 0; i < len(r); i++ {
		tok := r[i]
		arg := func() string {
			i++
			if i < len(r) {
				return r[i]
			}
			return ""
		}
		ok := true
		switch tok {
		case "!":
			neg = true
			continue
		case "-j":
			return true, prob, nil
		case "-m":
			switch m := arg(); m {
			case "comment", "tcp", "udp", "sctp", "statistic", "recent", "addrtype", "conntrack", "mark":
			default:
				return false, 0, fmt.Errorf("unknown match module %s", m)
			}
		case "--comment", "--mode", "--name", "--seconds":
			arg()
		case "--reap", "--set":
		case "--rcheck":
			prob = 0
		case "-p":
			ok = arg() == p.proto
		case "-d", "-s":
			v := arg()
			addr := p.dst
			if tok == "-s" {
				addr = p.src
			}
			pfx, err := netip.ParsePrefix(v)
			if err != nil {
				a, err2 := netip.ParseAddr(v)
				if err2 != nil {
					return false, 0, fmt.Errorf("bad address %q", v)
				}
				pfx = netip.PrefixFrom(a, 32)
			}
			ok = pfx.Contains(addr)
		case "--dport":
			n, err := strconv.Atoi(arg())
			if err != nil {
				return false, 0, err
			}
			ok = n == p.dport
		case "--probability":
			f, err := strconv.ParseFloat(arg(), 64)
			if err != nil {
				return false, 0, err
			}
			prob *= f
		case "--dst-type", "--src-type":
			if v := arg(); v != "LOCAL" {
				return false, 0, fmt.Errorf("unknown addrtype %s", v)
			}
			if tok == "--dst-type" {
				ok = tr.local[p.dst]
			} else {
				ok = tr.local[p.src]
			}
		case "--ctstate":
			v := arg()
			switch v {
			case "DNAT":
				ok = s.dnat
			case "NEW":
				ok = true
			case "INVALID", "RELATED,ESTABLISHED":
				ok = false
			default:
				return false, 0, fmt.Errorf("unknown ctstate %s", v)
			}
		case "--mark":
			v := arg()
			val, mask, _ := strings.Cut(v, "/")
			a, err1 := strconv.ParseUint(strings.TrimPrefix(val, "0x"), 16, 32)
			b, err2 := strconv.ParseUint(strings.TrimPrefix(mask, "0x"), 16, 32)
			if err1 != nil || err2 != nil {
				return false, 0, fmt.Errorf("bad mark %s", v)
			}
			ok = s.mark&uint32(b) == uint32(a)
		default:
			return false, 0, fmt.Errorf("unknown match %s", tok)
		}
		if neg {
			ok = !ok
			neg = false
		}
		if !ok {
			return false, 0, nil
		}
	}
	return false, 0, nil // a rule without -j does nothing
}

func (tr *tracer) target(table string, r []string, p packet, s outcome, depth int) ([]outcome, error) {
	j := -1
	for i := range r {
		if r[i] == "-j" {
			j = i
			break
		}
	}
	t, args := r[j+1], r[j+2:]
	switch t {
	case "RETURN":
		s.ret = true
	case "ACCEPT", "DROP":
		s.verdict = t
	case "REJECT":
		if table != "filter" {
			return nil, fmt.Errorf("REJECT in %s", table)
		}
		s.verdict, s.reject = t, "icmp-port-unreachable"
		if len(args) == 2 && args[0] == "--reject-with" {
			s.reject = args[1]
		}
	case "DNAT":
		if table != "nat" || len(args) != 2 || args[0] != "--to-destination" {
			return nil, fmt.Errorf("bad DNAT %v", r)
		}
		to, err := netip.ParseAddrPort(args[1])
		if err != nil {
			return nil, err
		}
		s.verdict, s.to = t, to
	case "MARK":
		if len(args) != 2 {
			return nil, fmt.Errorf("bad MARK %v", r)
		}
		v, err := strconv.ParseUint(strings.TrimPrefix(args[1], "0x"), 16, 32)
		if err != nil {
			return nil, err
		}
		switch args[0] {
		case "--or-mark":
			s.mark |= uint32(v)
		case "--xor-mark":
			s.mark ^= uint32(v)
		default:
			return nil, fmt.Errorf("bad MARK %v", r)
		}
	case "MASQUERADE":
		s.verdict = t
	default:
		return tr.walk(table, t, p, s, depth+1)
	}
	return []outcome{s}, nil
}
