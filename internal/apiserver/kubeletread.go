package apiserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// maxKubeletRead bounds what GetFromKubelet reads of one answer.
const maxKubeletRead = 64 << 20

// GetFromKubelet reads path (with its query, e.g. "/metrics/resource") from the kubelet
// of the Node called node, the way nodes/proxy reaches it: https at the node's
// InternalIP and kubelet port, with the API server's kubelet client certificate, and
// only if that address is on this machine (package localnet). accept is the request's
// Accept header, if any. It is how parts of the API server read kubelets, such as the
// resource metrics scraper. An answer other than 200 is an error naming its status.
func (s *Server) GetFromKubelet(ctx context.Context, node, path, accept string) ([]byte, error) {
	loc, rt, err := s.nodeProxyLocation(ctx, "https", node, "")
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.String()+path, nil)
	if err != nil {
		return nil, fmt.Errorf("kubelet of node %q: %w", node, err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("kubelet of node %q: %w", node, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKubeletRead+1))
	if err != nil {
		return nil, fmt.Errorf("kubelet of node %q: read %s: %w", node, path, err)
	}
	if len(body) > maxKubeletRead {
		return nil, fmt.Errorf("kubelet of node %q: %s is larger than %d bytes", node, path, maxKubeletRead)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kubelet of node %q: GET %s: %s", node, path, resp.Status)
	}
	return body, nil
}
