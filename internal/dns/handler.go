package dns

import (
	"context"
	"log/slog"
	"net"

	"github.com/miekg/dns"
)

// ednsSize is the UDP payload size the server advertises in EDNS answers
// (the size DNS flag day 2020 recommends).
const ednsSize = 1232

// handler serves one DNS message: from the index for the zone, from the
// upstreams for the rest.
type handler struct {
	res *resolver
	fwd *forwarder
	ctx context.Context // the server's; forwarded questions end with it
	log *slog.Logger
}

var _ dns.Handler = (*handler)(nil)

// ServeDNS answers req on w.
func (h *handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	resp, forward := h.res.answer(req)
	if forward {
		ctx, cancel := context.WithTimeout(h.ctx, 2*forwardTimeout)
		defer cancel()
		var err error
		resp, err = h.fwd.forward(ctx, req)
		if err != nil {
			h.log.Debug("dns: forward", "name", req.Question[0].Name, "err", err)
			resp = new(dns.Msg)
			resp.SetRcode(req, dns.RcodeServerFailure)
			resp.RecursionAvailable = true
		}
		resp.Id = req.Id
	} else if req.IsEdns0() != nil {
		resp.SetEdns0(ednsSize, false)
	}
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		size := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = int(max(opt.UDPSize(), dns.MinMsgSize))
		}
		resp.Truncate(size)
	}
	if err := w.WriteMsg(resp); err != nil {
		h.log.Debug("dns: write answer", "err", err)
	}
}
