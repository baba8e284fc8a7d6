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
// default --reject-with, ...), if any. Comments are quoted as xtables quotes
// them.
//
// It knows the matches and targets the renderer uses and returns false for
// anything else: a full sync then treats the chain as changed and rewrites
// it, so a rule SaveForm cannot predict costs a restore, never a wrong diff.
func SaveForm(rule string) (string, bool) {
	// Fixed-size scratch space: a rendered rule has a few dozen words.
	var tokBuf, optBuf [48]string
	toks, ok := splitRule(rule, tokBuf[:0])
	if !ok {
		return "", false
	}
	var hdrVal [5]string // -s -d -i -o -p
	var hdrNeg, hdrSet [5]bool
	type match struct {
		name   string
		lo, hi int // its options in opts
	}
	var matchBuf [12]match
	matches := matchBuf[:0]
	opts := optBuf[:0]
	target, tgtLo := "", 0
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
			opts = append(opts, t)
			continue
		}
		if slot := headerSlot(t); slot >= 0 {
			if i+1 >= len(toks) || hdrSet[slot] {
				return "", false
			}
			v, ok := headerValue(t, toks[i+1])
			if !ok {
				return "", false
			}
			i++
			hdrSet[slot] = true
			if v == "" { // -s 0.0.0.0/0 matches everything: not printed
				if neg {
					return "", false
				}
				continue
			}
			hdrVal[slot], hdrNeg[slot], neg = v, neg, false
			continue
		}
		switch t {
		case "-m", "--match":
			if neg || i+1 >= len(toks) || len(matches) == cap(matchBuf) {
				return "", false
			}
			matches = append(matches, match{name: toks[i+1], lo: len(opts), hi: len(opts)})
			i++
		case "-j", "--jump":
			if neg || i+1 >= len(toks) {
				return "", false
			}
			target, tgtLo = toks[i+1], len(opts)
			i++
		default:
			if len(matches) == 0 {
				return "", false
			}
			m := &matches[len(matches)-1]
			if neg {
				opts = append(opts, "!")
				neg = false
			}
			opts = append(opts, t)
			m.hi = len(opts)
		}
	}
	if neg || (target == "" && len(matches) == 0) {
		return "", false
	}
	var b strings.Builder
	b.Grow(len(rule) + 64)
	for i, v := range hdrVal {
		if v == "" {
			continue
		}
		if hdrNeg[i] {
			b.WriteString("! ")
		}
		b.WriteString(headerOpts[i])
		b.WriteString(v)
		b.WriteByte(' ')
	}
	for _, m := range matches {
		b.WriteString("-m ")
		b.WriteString(m.name)
		if !saveMatch(&b, m.name, opts[m.lo:m.hi], hdrVal[4]) {
			return "", false
		}
		b.WriteByte(' ')
	}
	if target == "" { // a rule that only matches (a KUBE-FW chain's last)
		return strings.TrimSuffix(b.String(), " "), true
	}
	b.WriteString("-j ")
	b.WriteString(target)
	if !saveTarget(&b, target, opts[tgtLo:]) {
		return "", false
	}
	return b.String(), true
}

// headerOpts are the header options in the order iptables-save prints them.
var headerOpts = [5]string{"-s ", "-d ", "-i ", "-o ", "-p "}

// splitRule splits a rule into its words, appended to out; a double-quoted
// word may hold spaces and backslash escapes.
func splitRule(rule string, out []string) ([]string, bool) {
	for i := 0; i < len(rule); {
		switch c := rule[i]; {
		case c == ' ':
			i++
		case c == '"':
			j, escaped := i+1, false
			for ; j < len(rule) && rule[j] != '"'; j++ {
				if rule[j] == '\\' {
					escaped = true
					j++
				}
			}
			if j >= len(rule) {
				return nil, false
			}
			w := rule[i+1 : j]
			if escaped {
				var u strings.Builder
				for k := 0; k < len(w); k++ {
					if w[k] == '\\' {
						k++
					}
					u.WriteByte(w[k])
				}
				w = u.String()
			}
			out = append(out, w)
			i = j + 1
		default:
			j := i
			for ; j < len(rule) && rule[j] != ' '; j++ {
				if c := rule[j]; c == '"' || c == '\\' || c == '\'' {
					return nil, false
				}
			}
			out = append(out, rule[i:j])
			i = j
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
		if strings.IndexByte(v, '/') < 0 {
			a, err := netip.ParseAddr(v)
			if err != nil || !a.Is4() {
				return "", false
			}
			var buf [16]byte
			if string(a.AppendTo(buf[:0])) == v { // the common case: no copy of v
				return v + "/32", true
			}
			return a.String() + "/32", true
		}
		p, err := netip.ParsePrefix(v)
		if err != nil || !p.Addr().Is4() {
			return "", false
		}
		if p.Bits() == 0 {
			return "", true
		}
		return p.Masked().String(), true
	case "-p":
		switch v {
		case "tcp", "udp", "sctp", "icmp":
			return v, true
		}
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

// saveMatch writes a match's options (with a leading space) as
// iptables-save prints them; false when it does not know them.
func saveMatch(b *strings.Builder, name string, opts []string, proto string) bool {
	switch name {
	case "comment":
		if len(opts) != 2 || opts[0] != "--comment" {
			return false
		}
		b.WriteString(" --comment ")
		writeSaveString(b, opts[1])
		return true
	case "tcp", "udp", "sctp":
		if proto != name {
			return false
		}
		var sport, dport []string // [!] option value
		for i := 0; i < len(opts); i++ {
			start := i
			if opts[i] == "!" {
				i++
			}
			if i+1 >= len(opts) {
				return false
			}
			if _, err := strconv.ParseUint(opts[i+1], 10, 16); err != nil || opts[i+1][0] == '0' || opts[i+1][0] == '+' {
				return false
			}
			switch opts[i] {
			case "--sport":
				if sport != nil {
					return false
				}
				sport = opts[start : i+2]
			case "--dport":
				if dport != nil {
					return false
				}
				dport = opts[start : i+2]
			default:
				return false
			}
			i++
		}
		for _, w := range slicesConcat2(sport, dport) {
			b.WriteByte(' ')
			b.WriteString(w)
		}
		return true
	case "mark":
		neg := len(opts) == 3 && opts[0] == "!"
		if neg {
			opts = opts[1:]
			b.WriteString(" !")
		}
		if len(opts) != 2 || opts[0] != "--mark" {
			return false
		}
		b.WriteString(" --mark ")
		return writeMark(b, opts[1])
	case "conntrack":
		neg := len(opts) == 3 && opts[0] == "!"
		if neg {
			opts = opts[1:]
			b.WriteString(" !")
		}
		if len(opts) != 2 || opts[0] != "--ctstate" {
			return false
		}
		s, ok := saveCtstate(opts[1])
		if !ok {
			return false
		}
		b.WriteString(" --ctstate ")
		b.WriteString(s)
		return true
	case "addrtype":
		var src, dst []string
		for i := 0; i < len(opts); i++ {
			start := i
			if opts[i] == "!" {
				i++
			}
			if i+1 >= len(opts) || !addrTypes[opts[i+1]] {
				return false
			}
			switch opts[i] {
			case "--src-type":
				src = opts[start : i+2]
			case "--dst-type":
				dst = opts[start : i+2]
			default:
				return false
			}
			i++
		}
		if src == nil && dst == nil {
			return false
		}
		for _, w := range slicesConcat2(src, dst) {
			b.WriteByte(' ')
			b.WriteString(w)
		}
		return true
	case "recent":
		return saveRecent(b, opts)
	case "statistic":
		if len(opts) != 4 || opts[0] != "--mode" || opts[1] != "random" || opts[2] != "--probability" {
			return false
		}
		p, err := strconv.ParseFloat(opts[3], 64)
		if err != nil || p < 0 || p > 1 {
			return false
		}
		// xt_statistic keeps the probability as a 31-bit fraction.
		q := uint32(math.Round(0x80000000 * p))
		var buf [24]byte
		b.WriteString(" --mode random --probability ")
		b.Write(strconv.AppendFloat(buf[:0], float64(q)/0x80000000, 'f', 11, 64))
		return true
	}
	return false
}

func slicesConcat2(a, b []string) []string {
	if a == nil {
		return b
	}
	return append(a[:len(a):len(a)], b...)
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

// saveRecent writes -m recent's options for --set or --rcheck (or --update,
// --remove) with --name, --seconds, --reap and the defaults --mask
// 255.255.255.255 and --rsource: the mode, --seconds, --reap, then --name
// with the mask and --rsource.
func saveRecent(b *strings.Builder, opts []string) bool {
	var mode, name, seconds string
	reap := false
	for i := 0; i < len(opts); i++ {
		switch opts[i] {
		case "--set", "--rcheck", "--update", "--remove":
			if mode != "" {
				return false
			}
			mode = opts[i]
		case "--reap":
			reap = true
		case "--rsource":
		case "--mask": // only the default
			if i+1 >= len(opts) || opts[i+1] != "255.255.255.255" {
				return false
			}
			i++
		case "--name", "--seconds":
			if i+1 >= len(opts) {
				return false
			}
			v := opts[i+1]
			if opts[i] == "--name" {
				if v == "" || strings.ContainsAny(v, " \"'") {
					return false
				}
				name = v
			} else {
				n, err := strconv.ParseUint(v, 10, 32)
				if err != nil || n == 0 || v[0] == '0' || v[0] == '+' {
					return false
				}
				seconds = v
			}
			i++
		default:
			return false
		}
	}
	if mode == "" || (reap && seconds == "") {
		return false
	}
	if name == "" {
		name = "DEFAULT"
	}
	b.WriteByte(' ')
	b.WriteString(mode)
	if seconds != "" {
		b.WriteString(" --seconds ")
		b.WriteString(seconds)
	}
	if reap {
		b.WriteString(" --reap")
	}
	b.WriteString(" --name ")
	b.WriteString(name)
	b.WriteString(" --mask 255.255.255.255 --rsource")
	return true
}

// saveTarget writes a target's options (with a leading space) as
// iptables-save prints them; false for a target it does not know or
// options it does not expect (a user chain takes none).
func saveTarget(b *strings.Builder, target string, opts []string) bool {
	switch target {
	case "ACCEPT", "DROP", "RETURN":
		return len(opts) == 0
	case "REJECT":
		switch {
		case len(opts) == 0:
			b.WriteString(" --reject-with icmp-port-unreachable")
			return true
		case len(opts) == 2 && opts[0] == "--reject-with" && rejectTypes[opts[1]]:
			b.WriteString(" --reject-with ")
			b.WriteString(opts[1])
			return true
		}
		return false
	case "DNAT":
		if len(opts) != 2 || opts[0] != "--to-destination" {
			return false
		}
		ap, err := netip.ParseAddrPort(opts[1])
		if err != nil || !ap.Addr().Is4() || ap.Port() == 0 {
			return false
		}
		var buf [24]byte
		b.WriteString(" --to-destination ")
		b.Write(ap.AppendTo(buf[:0]))
		return true
	case "MASQUERADE":
		if len(opts) == 0 {
			return true
		}
		if len(opts) == 1 && opts[0] == "--random-fully" {
			b.WriteString(" --random-fully")
			return true
		}
		return false
	case "MARK":
		if len(opts) != 2 {
			return false
		}
		v, m, hasMask := strings.Cut(opts[1], "/")
		val, err := strconv.ParseUint(v, 0, 32)
		if err != nil {
			return false
		}
		mask := uint64(math.MaxUint32)
		switch opts[0] {
		case "--or-mark": // mark |= v: value v, mask v
			mask = val
		case "--xor-mark": // mark ^= v: value v, mask 0
			mask = 0
		case "--set-mark", "--set-xmark":
			if hasMask {
				if mask, err = strconv.ParseUint(m, 0, 32); err != nil {
					return false
				}
			}
		default:
			return false
		}
		if hasMask && (opts[0] == "--or-mark" || opts[0] == "--xor-mark") {
			return false
		}
		b.WriteString(" --set-xmark 0x")
		b.WriteString(strconv.FormatUint(val, 16))
		b.WriteString("/0x")
		b.WriteString(strconv.FormatUint(mask, 16))
		return true
	}
	if strings.HasPrefix(target, "KUBE-") && len(opts) == 0 {
		return true // a user chain
	}
	return false
}

var rejectTypes = map[string]bool{"icmp-net-unreachable": true, "icmp-host-unreachable": true, "icmp-port-unreachable": true,
	"icmp-proto-unreachable": true, "icmp-net-prohibited": true, "icmp-host-prohibited": true, "icmp-admin-prohibited": true, "tcp-reset": true}

// writeMark writes "value[/mask]" as iptables prints a mark match: hex, the
// mask left out when it is all ones.
func writeMark(b *strings.Builder, s string) bool {
	v, m, hasMask := strings.Cut(s, "/")
	val, err := strconv.ParseUint(v, 0, 32)
	if err != nil {
		return false
	}
	b.WriteString("0x")
	b.WriteString(strconv.FormatUint(val, 16))
	if !hasMask {
		return true
	}
	mask, err := strconv.ParseUint(m, 0, 32)
	if err != nil {
		return false
	}
	if mask != math.MaxUint32 {
		b.WriteString("/0x")
		b.WriteString(strconv.FormatUint(mask, 16))
	}
	return true
}

// writeSaveString writes a string as xtables_save_string does: bare when
// it is only letters, digits, underscores and dashes, else in double quotes
// with double quotes, backslashes and single quotes escaped by a backslash.
func writeSaveString(b *strings.Builder, s string) {
	bare := s != ""
	for i := 0; i < len(s) && bare; i++ {
		c := s[i]
		bare = c == '_' || c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
	}
	if bare {
		b.WriteString(s)
		return
	}
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c == '\'' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
}
