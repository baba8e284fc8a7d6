package dns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// forwardTimeout bounds one upstream exchange.
const forwardTimeout = 2 * time.Second

// forwarder sends questions outside the cluster to upstream resolvers, over
// UDP and again over TCP when the UDP answer is truncated.
type forwarder struct {
	upstreams []string // host:port
	udp, tcp  *dns.Client
}

func newForwarder(upstreams []string) *forwarder {
	return &forwarder{
		upstreams: upstreams,
		udp:       &dns.Client{Net: "udp", Timeout: forwardTimeout, UDPSize: dns.DefaultMsgSize},
		tcp:       &dns.Client{Net: "tcp", Timeout: forwardTimeout},
	}
}

// errNoUpstreams is returned when there is no resolver to forward to.
var errNoUpstreams = errors.New("no upstream resolvers")

// forward asks each upstream in turn until one answers.
func (f *forwarder) forward(ctx context.Context, req *dns.Msg) (*dns.Msg, error) {
	if len(f.upstreams) == 0 {
		return nil, errNoUpstreams
	}
	var errs []error
	for _, up := range f.upstreams {
		resp, _, err := f.udp.ExchangeContext(ctx, req, up)
		if err == nil && resp.Truncated {
			resp, _, err = f.tcp.ExchangeContext(ctx, req, up)
		}
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("forward to %s: %w", up, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// resolvConfUpstreams reads the nameservers of a resolv.conf file as
// host:port, leaving out those that are this very server: listen (the
// server's address) with a loopback address, or any local address when the
// server listens on every address.
func resolvConfUpstreams(path, listen string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read upstreams: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		ip, err := netip.ParseAddr(fields[1])
		if err != nil {
			continue
		}
		up := netip.AddrPortFrom(ip, 53)
		if isSelf(up, listen) {
			continue
		}
		out = append(out, up.String())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read upstreams from %s: %w", path, err)
	}
	return out, nil
}

// isSelf reports whether a loopback upstream is the server listening on
// listen.
func isSelf(up netip.AddrPort, listen string) bool {
	if !up.Addr().IsLoopback() {
		return false
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port != fmt.Sprint(up.Port()) {
		return false
	}
	if host == "" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && (ip.IsUnspecified() || ip == up.Addr())
}
