package proxy

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kubette/kubette/internal/proxy/iptables"
)

// udpKey is a UDP destination a client addresses: a ClusterIP:port, or a
// NodePort (zero address).
type udpKey struct {
	addr netip.Addr
	port int32
}

// udpEndpoints maps every UDP service destination of m to the endpoint
// addresses its rules send traffic to.
func udpEndpoints(m iptables.Model) map[udpKey]map[netip.Addr]bool {
	out := map[udpKey]map[netip.Addr]bool{}
	for _, s := range m.Services {
		for _, p := range s.Ports {
			if !strings.EqualFold(p.Protocol, "UDP") {
				continue
			}
			eps := map[netip.Addr]bool{}
			for _, e := range iptables.UsableEndpoints(p.Endpoints) {
				eps[e.IP] = true
			}
			for _, ip := range s.ClusterIPs {
				out[udpKey{ip, p.Port}] = eps
			}
			if p.NodePort > 0 {
				out[udpKey{port: p.NodePort}] = eps
			}
		}
	}
	return out
}

// clearStaleUDP deletes the conntrack entries that would keep sending UDP
// flows to endpoints that are gone (UDP has no connection to break), and the
// entries of destinations that had no endpoint before (as upstream).
func (p *Proxy) clearStaleUDP(ctx context.Context, m iptables.Model) {
	now := udpEndpoints(m)
	prev := p.udp
	p.udp = now
	if prev == nil || p.conntrackOff {
		return
	}
	var cmds [][]string
	for k, old := range prev {
		cur := now[k]
		dst := []string{"-p", "udp"}
		if k.addr.IsValid() {
			dst = append(dst, "--orig-dst", k.addr.String(), "--orig-port-dst", strconv.Itoa(int(k.port)))
		} else {
			dst = append(dst, "--orig-port-dst", strconv.Itoa(int(k.port)))
		}
		for ep := range old {
			if !cur[ep] {
				cmds = append(cmds, append(append([]string{"-D"}, dst...), "--dst-nat", ep.String()))
			}
		}
	}
	for k, cur := range now {
		if len(cur) > 0 && len(prev[k]) == 0 && k.addr.IsValid() {
			cmds = append(cmds, []string{"-D", "-p", "udp", "--orig-dst", k.addr.String(), "--orig-port-dst", strconv.Itoa(int(k.port))})
		}
	}
	for _, c := range cmds {
		err := p.run.Conntrack(ctx, c...)
		if errors.Is(err, ErrNoConntrack) {
			p.conntrackOff = true
			p.log.Warn("conntrack tool not installed: conntrack entries of removed UDP endpoints are not cleared (install the conntrack package)")
			return
		}
		if err != nil {
			p.log.Warn("clear stale UDP conntrack entries", "args", strings.Join(c, " "), "err", err)
		}
	}
}
