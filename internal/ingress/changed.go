package ingress

import (
	"regexp"
	"slices"
	"strings"
)

var (
	upstreamStart = regexp.MustCompile(`^    upstream (\S+) \{$`)
	proxyPass     = regexp.MustCompile(`proxy_pass http://([^;]+);`)
)

// confSections splits a rendered configuration by owner: the text of every
// Ingress's servers and locations ("namespace/name", from the "# owner"
// comments) and of every upstream ("upstream:NAME"), and for every upstream
// the Ingresses that proxy to it.
func confSections(conf []byte) (text map[string]string, users map[string][]string) {
	parts := map[string]*strings.Builder{}
	add := func(key, line string) {
		b := parts[key]
		if b == nil {
			b = &strings.Builder{}
			parts[key] = b
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	users = map[string][]string{}
	owner, upstream := "", ""
	for _, l := range strings.Split(string(conf), "\n") {
		if upstream != "" {
			add("upstream:"+upstream, l)
			if l == "    }" {
				upstream = ""
			}
			continue
		}
		if strings.HasPrefix(l, "    upstream ") {
			if m := upstreamStart.FindStringSubmatch(l); m != nil {
				upstream = m[1]
				continue
			}
		}
		if o, ok := strings.CutPrefix(strings.TrimSpace(l), "# owner "); ok {
			owner = o
		}
		add(owner, l)
		if !strings.Contains(l, "proxy_pass ") {
			continue
		}
		if m := proxyPass.FindStringSubmatch(l); m != nil && !slices.Contains(users[m[1]], owner) {
			users[m[1]] = append(users[m[1]], owner)
		}
	}
	text = make(map[string]string, len(parts))
	for k, b := range parts {
		text[k] = b.String()
	}
	return text, users
}

// changedOwners lists, sorted, the Ingresses whose part of the configuration
// differs between two rendered configurations: their servers and locations,
// or the members of an upstream they proxy to.
func changedOwners(old, cur []byte) []string {
	a, ua := confSections(old)
	b, ub := confSections(cur)
	set := map[string]bool{}
	for _, m := range []map[string]string{a, b} {
		for k := range m {
			if a[k] == b[k] {
				continue
			}
			if name, ok := strings.CutPrefix(k, "upstream:"); ok {
				for _, o := range append(slices.Clone(ua[name]), ub[name]...) {
					set[o] = true
				}
				continue
			}
			set[k] = true
		}
	}
	var out []string
	for k := range set {
		if k != "" && k != "-" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
