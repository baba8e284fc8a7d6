package prober

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/kubelet"
)

var _ kubelet.HTTPHookRunner = (*Manager)(nil)

// RunHTTPHook sends the GET of an httpGet lifecycle hook with the probes' request and client
// (User-Agent kube-lifecycle/<KubeVersion>). As upstream's hook runner, any answer is a
// success whatever its status code: only a request that gets no answer fails. An HTTPS hook
// answered in plain HTTP is retried once over HTTP without its Authorization header, and
// fallback (non-empty then) says so for the event upstream records.
func (m *Manager) RunHTTPHook(ctx context.Context, pod *v1.Pod, c *v1.Container, g *v1.HTTPGetAction, podIP string) (fallback string, err error) {
	req, err := m.httpGetRequest(ctx, g, c, podIP, "lifecycle")
	if err != nil {
		return "", err
	}
	client, done := httpGetClient()
	defer done()
	resp, err := client.Do(req)
	discardBody(resp)
	if err == nil || !httpResponseToHTTPS(err) {
		return "", err
	}
	retry := req.Clone(ctx)
	retry.URL.Scheme = "http"
	retry.Header.Del("Authorization")
	resp, rerr := client.Do(retry)
	discardBody(resp)
	if rerr != nil {
		return "", err
	}
	return fmt.Sprintf("request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded", retry.URL.Host), nil
}

// discardBody reads (a bounded part of) and closes a response's body.
func discardBody(resp *http.Response) {
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxRespBodyLength))
}

// httpResponseToHTTPS tells whether err is Go's for a plain HTTP answer to an HTTPS request.
func httpResponseToHTTPS(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue) && strings.Contains(ue.Err.Error(), "server gave HTTP response to HTTPS client")
}
