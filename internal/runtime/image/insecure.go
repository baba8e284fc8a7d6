package image

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Registries is a parsed list of insecure registries, as docker's and containerd's
// "insecure-registries": a pull from a registry it matches may use plain HTTP, and its HTTPS
// certificate is not verified (PullOptions.Insecure). The zero value matches no registry.
//
// An entry is one of:
//   - "host" or "host:port", host a DNS name or an IPv4 address; without a port it matches
//     the host on every port;
//   - "[v6]" or "[v6]:port", an IPv6 address in brackets (a bare "v6" is accepted too, without
//     a port);
//   - a CIDR ("10.1.0.0/16", "fd00::/8"): it matches a registry named by an IP address in it,
//     on any port. Registry names are not resolved: a CIDR never matches a DNS name.
//
// A registry named without a port ("myreg/app:1") is reached on 443 (HTTPS) or 80 (HTTP),
// so it is matched by the entries "myreg", "myreg:443" and "myreg:80". Host names compare
// case-insensitively, addresses by value ("fd00:0::1" is "fd00::1").
type Registries struct{ patterns []registryPattern }

// registryPattern is one parsed entry of Registries.
type registryPattern struct {
	name   string       // lower-case DNS name; "" for an address or a CIDR
	addr   netip.Addr   // valid for an address entry
	prefix netip.Prefix // valid for a CIDR entry
	port   int          // 0: any port
}

// ParseRegistries parses insecure-registry entries (see Registries); the error names the
// first malformed entry and why.
func ParseRegistries(entries []string) (Registries, error) {
	var r Registries
	for _, e := range entries {
		p, err := parseRegistryPattern(e)
		if err != nil {
			return Registries{}, fmt.Errorf("insecure registry %q: %w", e, err)
		}
		r.patterns = append(r.patterns, p)
	}
	return r, nil
}

// Len is the number of entries.
func (r Registries) Len() int { return len(r.patterns) }

// Match reports whether registry ("host[:port]", as in an image reference) is insecure.
func (r Registries) Match(registry string) bool {
	if len(r.patterns) == 0 {
		return false
	}
	host, port, ok := splitRegistry(registry)
	if !ok {
		return false
	}
	name := strings.ToLower(host)
	addr, err := netip.ParseAddr(host)
	isAddr := err == nil
	if isAddr {
		addr = addr.Unmap()
	}
	for _, p := range r.patterns {
		switch {
		case p.prefix.IsValid():
			if isAddr && p.prefix.Contains(addr) {
				return true
			}
		case p.addr.IsValid():
			if isAddr && p.addr == addr && portMatches(p.port, port) {
				return true
			}
		default:
			if !isAddr && p.name == name && portMatches(p.port, port) {
				return true
			}
		}
	}
	return false
}

// portMatches: an entry without a port matches every port; a registry without a port is
// reached on 443 or 80.
func portMatches(entry, registry int) bool {
	switch {
	case entry == 0:
		return true
	case registry == 0:
		return entry == 443 || entry == 80
	default:
		return entry == registry
	}
}

// splitRegistry splits "host", "host:port", "[v6]" or "[v6]:port" (port 0: none).
func splitRegistry(s string) (host string, port int, ok bool) {
	rest := ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, false
		}
		host, rest = s[1:end], s[end+1:]
		if rest != "" && !strings.HasPrefix(rest, ":") {
			return "", 0, false
		}
		rest = strings.TrimPrefix(rest, ":")
		if rest == "" && strings.HasSuffix(s, ":") {
			return "", 0, false
		}
	} else {
		var hasPort bool
		host, rest, hasPort = strings.Cut(s, ":")
		if hasPort && rest == "" {
			return "", 0, false
		}
	}
	if rest != "" {
		n, err := strconv.Atoi(rest)
		if err != nil || n < 1 || n > 65535 || rest[0] == '+' {
			return "", 0, false
		}
		port = n
	}
	return host, port, host != ""
}

// parseRegistryPattern parses one entry; its errors say what is wrong with it.
func parseRegistryPattern(entry string) (registryPattern, error) {
	e := strings.TrimSpace(entry)
	switch {
	case e == "":
		return registryPattern{}, fmt.Errorf("empty entry")
	case strings.Contains(e, "://"):
		return registryPattern{}, fmt.Errorf("give host[:port] without a scheme")
	case strings.Contains(e, "*"):
		return registryPattern{}, fmt.Errorf("wildcards are not supported: give a host, host:port or CIDR")
	case strings.Contains(e, "/"):
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return registryPattern{}, fmt.Errorf("not a host[:port] (no path allowed) nor a CIDR: %w", err)
		}
		return registryPattern{prefix: p.Masked()}, nil
	}
	if !strings.HasPrefix(e, "[") && strings.Count(e, ":") > 1 { // a bare IPv6 address
		a, err := netip.ParseAddr(e)
		if err != nil {
			return registryPattern{}, fmt.Errorf("not an IPv6 address (write [address]:port for a port)")
		}
		if a.Zone() != "" {
			return registryPattern{}, fmt.Errorf("an IPv6 address with a zone cannot name a registry")
		}
		return registryPattern{addr: a}, nil
	}
	host, port, ok := splitRegistry(e)
	if !ok {
		return registryPattern{}, fmt.Errorf("not host[:port], [ipv6][:port] or a CIDR (a port is 1-65535)")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return registryPattern{}, fmt.Errorf("an IPv6 address with a zone cannot name a registry")
		}
		if strings.HasPrefix(e, "[") != a.Is6() {
			return registryPattern{}, fmt.Errorf("only IPv6 addresses go in brackets, and they must when a port follows")
		}
		return registryPattern{addr: a.Unmap(), port: port}, nil
	}
	if strings.HasPrefix(e, "[") {
		return registryPattern{}, fmt.Errorf("%q in brackets is not an IPv6 address", host)
	}
	if err := checkDNSName(host); err != nil {
		return registryPattern{}, err
	}
	return registryPattern{name: strings.ToLower(host), port: port}, nil
}

// checkDNSName checks a registry host name as image references allow it: dot-separated
// labels of letters, digits and inner hyphens.
func checkDNSName(host string) error {
	if len(host) > 253 {
		return fmt.Errorf("host name longer than 253 characters")
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("host name %q: empty or over-long label", host)
		}
		for i, c := range label {
			alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
			if !alnum && (c != '-' || i == 0 || i == len(label)-1) {
				return fmt.Errorf("host name %q: %q is not allowed there", host, c)
			}
		}
	}
	return nil
}
