package iptables

import (
	"math"
	"net/netip"
	"strconv"
	"strings"
)

// SaveForm returns rule (the text after "-A CHAIN ", as the renderer writes
// it) the way iptables-save (v1.8, nf_tables and legacy) prints it back: the
// address, interface and protocol options first (-s, -d, -i, -o, -p;
// addresses with their prefix length), then the matches in the order given,
// each with its options in the tool's order and defaults spelled out, then
// the target with its options (MARK's --or-mark as --set-xmark, REJECT's
// default --reject-with, ...). Comments are quoted as xtables quotes them.
//
// It knows the matches and targets the renderer uses and returns false for
// anything else: a full sync then treats the chain as changed and rewrites
// it, so a rule SaveForm cannot predict costs a restore, never a wrong diff.
func SaveForm(rule string) (string, bool) {
	toks, ok := splitRule(rule)
	if !ok {
		return "", false
	}
	var hdr [5]string // -s -d -i -o -p, each "" or "[! ]-x value"
	type match struct {
		name string
		opts []string
	}
	var matches []match
	target, tgtOpts := "", []string(nil)
	neg := false
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t == "!" {
			if neg {
				return "", false
			}
			neg = true
			continue
		}
		if target != "" {
			if neg {
				return "", false
			}
			tgtOpts = append(tgtOpts, t)
			continue
		}
		if slot := headerSlot(t); slot >= 0 {
			if i+1 >= len(toks) || hdr[slot] != "" {
				return "", false
			}
			v, ok := headerValue(t, toks[i+1])
			if !ok {
				return "", false
			}
			i++
			if v == "" { // -s 0.0.0.0/0 matches everything: not printed
				if neg {
					return "", false
				}
				continue
			}
			h := t + " " + v
			if neg {
				h = "! " + h
			}
			hdr[slot], neg = h, false
			continue
		}
		switch t {
		case "-m", "--match":
			if neg || i+1 >= len(toks) {
				return "", false
			}
			matches = append(matches, match{name: toks[i+1]})
			i++
		case "-j", "--jump":
			if neg || i+1 >= len(toks) {
				return "", false
			}
			target = toks[i+1]
			i++
		default:
			if len(matches) == 0 {
				return "", false
			}
			m := &matches[len(matches)-1]
			if neg {
				m.opts = append(m.opts, "!")
				neg = false
			}
			m.opts = append(m.opts, t)
		}
	}
	if neg || target == "" {
		return "", false
	}
	var b strings.Builder
	b.Grow(len(rule) + 32)
	for _, h := range hdr {
		if h != "" {
			b.WriteString(h)
			b.WriteByte(' ')
		}
	}
	for _, m := range matches {
		s, ok := saveMatch(m.name, m.opts, hdr[4])
		if !ok {
			return "", false
		}
		b.WriteString("-m ")
		b.WriteString(m.name)
		if s != "" {
			b.WriteByte(' ')
			b.WriteString(s)
		}
		b.WriteByte(' ')
	}
	s, ok := saveTarget(target, tgtOpts)
	if !ok {
		return "", false
	}
	b.WriteString("-j ")
	b.WriteString(target)
	if s != "" {
		b.WriteByte(' ')
		b.WriteString(s)
	}
	return b.String(), true
}

// splitRule splits a rule into its words; a double-quoted word may hold
// spaces and backslash escapes.
func splitRule(rule string) ([]string, bool) {
	out := make([]string, 0, 24)
	for i := 0; i < len(rule); {
		switch c := rule[i]; {
		case c == ' ':
			i++
		case c == '"':
			var w strings.Builder
			j := i + 1
			for ; j < len(rule) && rule[j] != '"'; j++ {
				if rule[j] == '\\' {
					j++
					if j == len(rule) {
						return nil, false
					}
				}
				w.WriteByte(rule[j])
			}
			if j == len(rule) {
				return nil, false
			}
			out = append(out, w.String())
			i = j + 1
		default:
			j := strings.IndexByte(rule[i:], ' ')
			if j < 0 {
				j = len(rule) - i
			}
			if strings.ContainsAny(rule[i:i+j], `"\'`) {
				return nil, false
			}
			out = append(out, rule[i:i+j])
			i += j
		}
	}
	return out, true
}

func headerSlot(opt string) int {
	switch opt {
	case "-s":
		return 0
	case "-d":
		return 1
	case "-i":
		return 2
	case "-o":
		return 3
	case "-p":
		return 4
	}
	return -1
}

// headerValue is the value of a header option as iptables-save prints it;
// "" for an address option that matches everything.
func headerValue(opt, v string) (string, bool) {
	switch opt {
	case "-s", "-d":
		var p netip.Prefix
		if strings.IndexByte(v, '/') >= 0 {
			var err error
			if p, err = netip.ParsePrefix(v); err != nil {
				return "", false
			}
		} else {
			a, err := netip.ParseAddr(v)
			if err != nil {
				return "", false
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if !p.Addr().Is4() {
			return "", false
		}
		if p.Bits() == 0 {
			return "", true
		}
		return p.Masked().String(), true
	case "-p":
		switch p := strings.ToLower(v); p {
		case "tcp", "udp", "sctp", "icmp":
			return p, true
		}
		return "", false
	default: // -i, -o
		if v == "" || strings.ContainsAny(v, " \"'") {
			return "", false
		}
		return v, true
	}
}

// saveMatch returns a match's options as iptables-save prints them.
func saveMatch(name string, opts []string, proto string) (string, bool) {
	switch name {
	case "comment":
		if len(opts) != 2 || opts[0] != "--comment" {
			return "", false
		}
		return "--comment " + saveString(opts[1]), true
	case "tcp", "udp", "sctp":
		if proto != "-p "+name {
			return "", false
		}
		var sport, dport string
		for i := 0; i < len(opts); i++ {
			neg := opts[i] == "!"
			if neg {
				i++
			}
			if i+1 >= len(opts) {
				return "", false
			}
			n, err := strconv.ParseUint(opts[i+1], 10, 16)
			if err != nil {
				return "", false
			}
			v := opts[i] + " " + strconv.FormatUint(n, 10)
			if neg {
				v = "! " + v
			}
			switch opts[i] {
			case "--sport", "--source-port":
				if sport != "" {
					return "", false
				}
				sport = strings.Replace(v, "--source-port", "--sport", 1)
			case "--dport", "--destination-port":
				if dport != "" {
					return "", false
				}
				dport = strings.Replace(v, "--destination-port", "--dport", 1)
			default:
				return "", false
			}
			i++
		}
		return joinNonEmpty(sport, dport), true
	case "mark":
		neg := len(opts) == 3 && opts[0] == "!"
		if neg {
			opts = opts[1:]
		}
		if len(opts) != 2 || opts[0] != "--mark" {
			return "", false
		}
		v, ok := saveMark(opts[1], false)
		if !ok {
			return "", false
		}
		if neg {
			return "! --mark " + v, true
		}
		return "--mark " + v, true
	case "conntrack":
		neg := len(opts) == 3 && opts[0] == "!"
		if neg {
			opts = opts[1:]
		}
		if len(opts) != 2 || opts[0] != "--ctstate" {
			return "", false
		}
		s, ok := saveCtstate(opts[1])
		if !ok {
			return "", false
		}
		if neg {
			return "! --ctstate " + s, true
		}
		return "--ctstate " + s, true
	case "addrtype":
		var src, dst string
		for i := 0; i < len(opts); i++ {
			neg := opts[i] == "!"
			if neg {
				i++
			}
			if i+1 >= len(opts) || !addrTypes[opts[i+1]] {
				return "", false
			}
			v := opts[i] + " " + opts[i+1]
			if neg {
				v = "! " + v
			}
			switch opts[i] {
			case "--src-type":
				src = v
			case "--dst-type":
				dst = v
			default:
				return "", false
			}
			i++
		}
		if src == "" && dst == "" {
			return "", false
		}
		return joinNonEmpty(src, dst), true
	case "recent":
		return saveRecent(opts)
	case "statistic":
		if len(opts) != 4 || opts[0] != "--mode" || opts[1] != "random" || opts[2] != "--probability" {
			return "", false
		}
		p, err := strconv.ParseFloat(opts[3], 64)
		if err != nil || p < 0 || p > 1 {
			return "", false
		}
		// xt_statistic keeps the probability as a 31-bit fraction.
		q := uint32(math.Round(0x80000000 * p))
		return "--mode random --probability " + strconv.FormatFloat(float64(q)/0x80000000, 'f', 11, 64), true
	}
	return "", false
}

var addrTypes = map[string]bool{"UNSPEC": true, "UNICAST": true, "LOCAL": true, "BROADCAST": true, "ANYCAST": true,
	"MULTICAST": true, "BLACKHOLE": true, "UNREACHABLE": true, "PROHIBIT": true, "THROW": true, "NAT": true, "XRESOLVE": true}

// ctstates in the order iptables prints them.
var ctstates = []string{"INVALID", "NEW", "RELATED", "ESTABLISHED", "UNTRACKED", "SNAT", "DNAT"}

func saveCtstate(list string) (string, bool) {
	have := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		have[s] = true
	}
	var out []string
	for _, s := range ctstates {
		if have[s] {
			out = append(out, s)
			delete(have, s)
		}
	}
	if len(have) > 0 || len(out) == 0 {
		return "", false
	}
	return strings.Join(out, ","), true
}

// saveRecent handles -m recent with --set or --rcheck, --name, --seconds and
// --reap: printed as the mode, --seconds, --reap, then --name with the
// default --mask and --rsource.
func saveRecent(opts []string) (string, bool) {
	var mode, name, seconds string
	reap := false
	for i := 0; i < len(opts); i++ {
		switch opts[i] {
		case "--set", "--rcheck", "--update", "--remove":
			if mode != "" {
				return "", false
			}
			mode = opts[i]
		case "--reap":
			reap = true
		case "--rsource":
		case "--mask": // only the default
			if i+1 >= len(opts) || opts[i+1] != "255.255.255.255" {
				return "", false
			}
			i++
		case "--name", "--seconds":
			if i+1 >= len(opts) {
				return "", false
			}
			v := opts[i+1]
			if opts[i] == "--name" {
				if v == "" || strings.ContainsAny(v, " \"'") {
					return "", false
				}
				name = v
			} else {
				n, err := strconv.ParseUint(v, 10, 32)
				if err != nil || n == 0 {
					return "", false
				}
				seconds = strconv.FormatUint(n, 10)
			}
			i++
		default:
			return "", false
		}
	}
	if mode == "" || (reap && seconds == "") {
		return "", false
	}
	if name == "" {
		name = "DEFAULT"
	}
	s := mode
	if seconds != "" {
		s += " --seconds " + seconds
	}
	if reap {
		s += " --reap"
	}
	return s + " --name " + name + " --mask 255.255.255.255 --rsource", true
}

// saveTarget returns a target's options as iptables-save prints them; a
// user chain or a target it does not know with options is refused.
func saveTarget(target string, opts []string) (string, bool) {
	switch target {
	case "ACCEPT", "DROP", "RETURN":
		return "", len(opts) == 0
	case "REJECT":
		switch {
		case len(opts) == 0:
			return "--reject-with icmp-port-unreachable", true
		case len(opts) == 2 && opts[0] == "--reject-with" && rejectTypes[opts[1]]:
			return "--reject-with " + opts[1], true
		}
		return "", false
	case "DNAT":
		if len(opts) != 2 || opts[0] != "--to-destination" {
			return "", false
		}
		ap, err := netip.ParseAddrPort(opts[1])
		if err != nil || !ap.Addr().Is4() || ap.Port() == 0 {
			return "", false
		}
		return "--to-destination " + ap.String(), true
	case "MASQUERADE":
		if len(opts) == 0 {
			return "", true
		}
		if len(opts) == 1 && opts[0] == "--random-fully" {
			return "--random-fully", true
		}
		return "", false
	case "MARK":
		if len(opts) != 2 {
			return "", false
		}
		switch opts[0] {
		case "--or-mark", "--xor-mark", "--set-mark", "--set-xmark":
		default:
			return "", false
		}
		v, ok := saveMark(opts[1], opts[0] != "--set-xmark" && opts[0] != "--set-mark")
		if !ok {
			return "", false
		}
		val, mask, _ := strings.Cut(v, "/")
		switch opts[0] {
		case "--or-mark": // mark |= v: value v, mask v
			return "--set-xmark " + val + "/" + val, true
		case "--xor-mark": // mark ^= v: value v, mask 0
			return "--set-xmark " + val + "/0x0", true
		default:
			if mask == "" {
				mask = "0xffffffff"
			}
			return "--set-xmark " + val + "/" + mask, true
		}
	}
	if strings.HasPrefix(target, "KUBE-") && len(opts) == 0 {
		return "", true // a user chain
	}
	return "", false
}

var rejectTypes = map[string]bool{"icmp-net-unreachable": true, "icmp-host-unreachable": true, "icmp-port-unreachable": true,
	"icmp-proto-unreachable": true, "icmp-net-prohibited": true, "icmp-host-prohibited": true, "icmp-admin-prohibited": true, "tcp-reset": true}

// saveMark parses "value[/mask]" and prints it as iptables does: hex, the
// mask left out when it is all ones. noMask refuses a mask.
func saveMark(s string, noMask bool) (string, bool) {
	v, m, hasMask := strings.Cut(s, "/")
	if hasMask && noMask {
		return "", false
	}
	val, err := strconv.ParseUint(v, 0, 32)
	if err != nil {
		return "", false
	}
	out := "0x" + strconv.FormatUint(val, 16)
	if !hasMask {
		return out, true
	}
	mask, err := strconv.ParseUint(m, 0, 32)
	if err != nil {
		return "", false
	}
	if mask == math.MaxUint32 {
		return out, true
	}
	return out + "/0x" + strconv.FormatUint(mask, 16), true
}

// saveString quotes a string as xtables_save_string does: bare when it is
// only letters, digits, underscores and dashes, else in double quotes with
// double quotes, backslashes and single quotes escaped by a backslash.
func saveString(s string) string {
	bare := s != ""
	for i := 0; i < len(s) && bare; i++ {
		c := s[i]
		bare = c == '_' || c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
	}
	if bare {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c == '\'' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + " " + b
}
