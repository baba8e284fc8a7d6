// Package webhookclient posts JSON to the webhooks the API server calls (admission
// webhooks, conversion webhooks): at a URL, or at a Service as
// https://NAME.NAMESPACE.svc:PORT/PATH dialled at one of its ready endpoints,
// verified with the configuration's CA bundle, on this machine only.
package webhookclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/localnet"
	"github.com/kubette/kubette/internal/serviceendpoint"
)

// maxResponseBytes bounds a webhook's answer.
const maxResponseBytes = 10 << 20

// Lookup reads the Services and EndpointSlices that a Service reference resolves to
// (the API server's watch caches).
type Lookup interface {
	Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error)
	List(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error)
}

// Config is where a webhook is and whom it is verified by, the fields of
// admissionregistration's and apiextensions' WebhookClientConfig.
type Config struct {
	URL      *string
	Service  *Service
	CABundle []byte
}

// Service is a webhook behind a Service; Port defaults to 443.
type Service struct {
	Namespace, Name string
	Path            *string
	Port            *int32
}

// Client posts to webhooks: to a URL, or to a Service's endpoint
// as https://NAME.NAMESPACE.svc:PORT/PATH, verified against the configuration's
// caBundle (the system's roots when it has none) with the Service's DNS name. A
// Service is reached at one of its ready endpoints (upstream's endpoint routing),
// so webhooks work before, and without, the node's Service proxy. Only this
// machine's addresses are dialled: IP literals and "localhost", no other name is
// resolved.
type Client struct {
	srv Lookup

	mu         sync.Mutex
	transports map[string]*http.Transport // by caBundle digest
}

// New returns a client that resolves Services through l.
func New(l Lookup) *Client {
	return &Client{srv: l, transports: map[string]*http.Transport{}}
}

// webhookURL is where a webhook is posted, with upstream's timeout query parameter.
func webhookURL(cc Config, timeout time.Duration) (*url.URL, error) {
	var u *url.URL
	if cc.URL != nil {
		var err error
		if u, err = url.Parse(*cc.URL); err != nil {
			return nil, fmt.Errorf("webhook URL %q: %w", *cc.URL, err)
		}
	} else if s := cc.Service; s != nil {
		port := int32(443)
		if s.Port != nil {
			port = *s.Port
		}
		u = &url.URL{Scheme: "https", Host: net.JoinHostPort(s.Name+"."+s.Namespace+".svc", strconv.Itoa(int(port)))}
		if s.Path != nil {
			u.Path = *s.Path
		}
	} else {
		return nil, errors.New("the webhook has neither a URL nor a Service")
	}
	q := u.Query()
	q.Set("timeout", timeout.String())
	u.RawQuery = q.Encode()
	return u, nil
}

// Post sends body (JSON) to the webhook within timeout and returns its answer's
// body; the URL carries upstream's timeout query parameter.
func (c *Client) Post(ctx context.Context, cfg Config, timeout time.Duration, body []byte) ([]byte, error) {
	u, err := webhookURL(cfg, timeout)
	if err != nil {
		return nil, err
	}
	tr, err := c.transport(cfg.CABundle)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if s := cfg.Service; s != nil {
		ctx = context.WithValue(ctx, serviceKey{}, s)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to call webhook: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("failed to read the webhook's response: %w", err)
	}
	if len(data) > maxResponseBytes {
		return nil, fmt.Errorf("the webhook's response is larger than %d bytes", maxResponseBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("the webhook answered %s: %.200s", resp.Status, data)
	}
	return data, nil
}

// serviceKey carries the Service a request goes to, for the dialer.
type serviceKey struct{}

// transport returns the transport that trusts caBundle, one per bundle.
func (c *Client) transport(caBundle []byte) (*http.Transport, error) {
	sum := sha256.Sum256(caBundle)
	key := string(sum[:])
	c.mu.Lock()
	defer c.mu.Unlock()
	if tr, ok := c.transports[key]; ok {
		return tr, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("the webhook's caBundle holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	// Only this machine's addresses are dialled (package localnet), as every proxy of
	// the API server: a webhook's URL or endpoint elsewhere is refused without a packet.
	dialer := &localnet.Dialer{Dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}
	tr := &http.Transport{
		TLSClientConfig: cfg, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 10, IdleConnTimeout: 90 * time.Second,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if s, ok := ctx.Value(serviceKey{}).(*Service); ok {
				resolved, err := c.resolve(ctx, s)
				if err != nil {
					return nil, err
				}
				addr = resolved
			}
			if host, port, err := net.SplitHostPort(addr); err == nil && host == "localhost" {
				addr = net.JoinHostPort("127.0.0.1", port)
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}
	// Connections are pooled by host name; a Service's name stands for whichever of
	// its endpoints the dialer chose, as a name resolving to several addresses would.
	c.transports[key] = tr
	return tr, nil
}

// resolve returns host:port of a ready endpoint of the Service's port (the
// ExternalName's host for an ExternalName Service).
func (c *Client) resolve(ctx context.Context, ref *Service) (string, error) {
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	obj, err := c.srv.Get(ctx, schema.GroupResource{Resource: "services"}, ref.Namespace, ref.Name)
	if err != nil {
		return "", fmt.Errorf("service %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return "", fmt.Errorf("service %s/%s is a %T", ref.Namespace, ref.Name, obj)
	}
	objs, err := c.srv.List(ctx, schema.GroupResource{Group: discoveryv1.GroupName, Resource: "endpointslices"}, ref.Namespace)
	if err != nil {
		return "", fmt.Errorf("endpoints of service %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	slices := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if es, ok := o.(*discoveryv1.EndpointSlice); ok {
			slices = append(slices, es)
		}
	}
	hostPort, err := serviceendpoint.Pick(svc, slices, port)
	switch {
	case errors.Is(err, serviceendpoint.ErrNoPort):
		return "", fmt.Errorf("service %s/%s has no port %d", ref.Namespace, ref.Name, port)
	case err != nil:
		return "", fmt.Errorf("service %s/%s has no ready endpoints for port %d", ref.Namespace, ref.Name, port)
	}
	return hostPort, nil
}
