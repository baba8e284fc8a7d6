package apiserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"

	"github.com/kubette/kubette/internal/localnet"
	"github.com/kubette/kubette/internal/streamproxy"
)

// subresourceProxy is the proxy subresource of pods, services and nodes, as upstream's
// ProxyREST: {name}/proxy[/{path}], where name may be "name", "name:port" or
// "scheme:name:port".
const subresourceProxy = "proxy"

// proxyMethods are the HTTP methods the proxy subresources pass on, as upstream's.
var proxyMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// proxyTransports are the connections of the proxy subresources: pods (and the endpoints
// Services resolve to) over plain HTTP or TLS without verification (pods have no
// certificate for their IP, as upstream's proxy transport), kubelets with the API server's
// kubelet client credentials. Both dial only addresses of this machine (localnet).
type proxyTransports struct {
	pods    *http.Transport
	kubelet *http.Transport // nil without kubelet client credentials
}

func newProxyTransports(kubeletTLS *tls.Config) *proxyTransports {
	dial := (&localnet.Dialer{Dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}).DialContext
	t := &proxyTransports{pods: &http.Transport{
		DialContext:         dial,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // pods serve certificates for no IP: upstream does not verify them either
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 25,
		IdleConnTimeout:     90 * time.Second,
	}}
	if kubeletTLS != nil {
		cfg := kubeletTLS.Clone()
		if cfg.MinVersion == 0 {
			cfg.MinVersion = tls.VersionTLS12
		}
		t.kubelet = &http.Transport{
			DialContext:         dial,
			TLSClientConfig:     cfg,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 25,
			IdleConnTimeout:     90 * time.Second,
		}
	}
	return t
}

// closeIdleOnDone closes the idle connections once ctx is done.
func (t *proxyTransports) closeIdleOnDone(ctx context.Context) {
	<-ctx.Done()
	t.pods.CloseIdleConnections()
	if t.kubelet != nil {
		t.kubelet.CloseIdleConnections()
	}
}

// proxyVerb is the verb a proxy request is authorized and recorded as: upstream's
// request info maps the method alone, without list or watch (OPTIONS has none).
func proxyVerb(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return ""
}

// handleProxy serves pods/proxy, services/proxy and nodes/proxy: it resolves the object
// to an address on this machine and passes the request on with apimachinery's
// upgrade-aware proxy, as upstream: query, body and answer as they are, a request for the
// root without the trailing slash redirected to it (301), the Location header and the links
// of HTML answers rewritten to go through the API server, upgrades (WebSocket) tunnelled.
func (s *Server) handleProxy(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	if !proxyMethods[req.Method] {
		s.writeError(w, req, apierrors.NewGenericServerResponse(http.StatusMethodNotAllowed, "", schema.GroupResource{}, "", "", 0, false))
		return
	}
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(ri.name)
	if !ok {
		s.writeError(w, req, apierrors.NewBadRequest(fmt.Sprintf("invalid %s request %q", ri.res.Singular, ri.name)))
		return
	}
	var loc *url.URL
	var rt http.RoundTripper
	var err error
	switch ri.res.GroupResource() {
	case schema.GroupResource{Resource: "pods"}:
		loc, err = s.podProxyLocation(req.Context(), ri, scheme, name, port)
		rt = s.proxy.pods
	case schema.GroupResource{Resource: "services"}:
		loc, err = s.serviceProxyLocation(req.Context(), ri, scheme, name, port)
		rt = s.proxy.pods
	case schema.GroupResource{Resource: "nodes"}:
		loc, rt, err = s.nodeProxyLocation(req.Context(), scheme, name, port)
	default:
		err = errPathNotFound()
	}
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	loc.Path = utilnet.JoinPreservingTrailingSlash(loc.Path, ri.proxyPath)
	// The caller's credentials are the API server's business, never the backend's.
	req = req.Clone(req.Context())
	req.Header.Del("Authorization")
	h := proxy.NewUpgradeAwareHandler(loc, rt, true, false, proxyResponder{s})
	h.ServeHTTP(streamproxy.ResponseWriter(w), req)
}

// podProxyLocation is upstream's pod ResourceLocation: the pod's IP and the port asked
// for, else the first port a container declares.
func (s *Server) podProxyLocation(ctx context.Context, ri *requestInfo, scheme, name, port string) (*url.URL, error) {
	obj, _, err := s.getFromStorage(ctx, ri.res, ri.namespace, name)
	if err != nil {
		return nil, err
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("stored pod is a %T", obj))
	}
	if port == "" {
		for _, c := range pod.Spec.Containers {
			if len(c.Ports) > 0 {
				port = strconv.Itoa(int(c.Ports[0].ContainerPort))
				break
			}
		}
	}
	podIP := pod.Status.PodIP
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	ip, err := netip.ParseAddr(podIP)
	if err != nil || !ip.IsGlobalUnicast() {
		return nil, apierrors.NewBadRequest("address not allowed")
	}
	if err := localnet.Check(ip); err != nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("pod %q has IP %s, which the API server does not reach: %v", name, ip, err))
	}
	loc := &url.URL{Scheme: scheme, Host: ip.String()}
	if port != "" {
		loc.Host = net.JoinHostPort(ip.String(), port)
	}
	return loc, nil
}

// serviceProxyLocation is upstream's service ResourceLocation: a port number is turned
// into the name of the Service's port, then a ready address of the Service's Endpoints
// that has a port of that name, picked at random among those that are pods of the
// namespace, with that endpoint port (the target port). Addresses this machine does not
// reach are passed over, and named when none is left.
func (s *Server) serviceProxyLocation(ctx context.Context, ri *requestInfo, scheme, name, port string) (*url.URL, error) {
	if n, err := strconv.ParseInt(port, 10, 64); err == nil {
		obj, _, err := s.getFromStorage(ctx, ri.res, ri.namespace, name)
		if err != nil {
			return nil, err
		}
		svc, ok := obj.(*corev1.Service)
		if !ok {
			return nil, apierrors.NewInternalError(fmt.Errorf("stored service is a %T", obj))
		}
		found := false
		for _, sp := range svc.Spec.Ports {
			if int64(sp.Port) == n {
				port, found = sp.Name, true
				break
			}
		}
		if !found {
			return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", n, name))
		}
	}
	epRes, _ := s.table.Lookup(schemaCoreV1, "endpoints")
	obj, _, err := s.getFromStorage(ctx, epRes, ri.namespace, name)
	if err != nil {
		return nil, err
	}
	eps, ok := obj.(*corev1.Endpoints)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("stored endpoints is a %T", obj))
	}
	if len(eps.Subsets) == 0 {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name))
	}
	var notLocal []string
	ssSeed := rand.IntN(len(eps.Subsets))
	for i := range eps.Subsets {
		ss := &eps.Subsets[(ssSeed+i)%len(eps.Subsets)]
		if len(ss.Addresses) == 0 {
			continue
		}
		for _, p := range ss.Ports {
			if p.Name != port {
				continue
			}
			addrSeed := rand.IntN(len(ss.Addresses))
			for try := range ss.Addresses {
				addr := ss.Addresses[(addrSeed+try)%len(ss.Addresses)]
				if !s.isEndpointPod(ctx, ri.namespace, &addr) {
					continue
				}
				ip, err := netip.ParseAddr(addr.IP)
				if err != nil {
					continue
				}
				if localnet.Check(ip) != nil {
					notLocal = append(notLocal, addr.IP)
					continue
				}
				return &url.URL{Scheme: scheme, Host: net.JoinHostPort(ip.String(), strconv.Itoa(int(p.Port)))}, nil
			}
		}
	}
	if len(notLocal) > 0 {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q that the API server reaches: %v are on no network of this machine", ri.name, notLocal))
	}
	return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", ri.name))
}

// isEndpointPod reports whether an endpoint address is a pod of the namespace that has
// the address, as upstream's isValidAddress: the proxy only reaches pods.
func (s *Server) isEndpointPod(ctx context.Context, namespace string, addr *corev1.EndpointAddress) bool {
	if addr.TargetRef == nil || addr.TargetRef.Namespace != namespace {
		return false
	}
	pods, _ := s.table.Lookup(schemaCoreV1, "pods")
	obj, _, err := s.getFromStorage(ctx, pods, namespace, addr.TargetRef.Name)
	if err != nil {
		return false
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return false
	}
	for _, ip := range pod.Status.PodIPs {
		if ip.IP == addr.IP {
			return true
		}
	}
	return pod.Status.PodIP == addr.IP
}

// nodeProxyLocation is upstream's node ResourceLocation: the kubelet (https, its port and
// the kubelet client credentials) unless another port is asked for, which is reached at
// the node's address with the scheme asked for.
func (s *Server) nodeProxyLocation(ctx context.Context, scheme, name, port string) (*url.URL, http.RoundTripper, error) {
	hostPort, err := s.kubeletHostPort(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	host, kubeletPort, err := net.SplitHostPort(hostPort)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsGlobalUnicast() {
		return nil, nil, apierrors.NewBadRequest("address not allowed")
	}
	if err := localnet.Check(ip); err != nil {
		return nil, nil, apierrors.NewServiceUnavailable(fmt.Sprintf("node %q has address %s, which the API server does not reach: %v", name, ip, err))
	}
	if port == "" || port == kubeletPort {
		if s.proxy.kubelet == nil {
			return nil, nil, apierrors.NewServiceUnavailable("the API server has no kubelet client certificate")
		}
		return &url.URL{Scheme: "https", Host: hostPort}, s.proxy.kubelet, nil
	}
	return &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port)}, s.proxy.pods, nil
}

// proxyResponder answers a failure of the proxied request: the error's Status (the
// rewriting transport reports a backend it cannot reach as 503 "error trying to reach
// service"), else an internal error, as upstream's responder.
type proxyResponder struct{ s *Server }

func (p proxyResponder) Error(w http.ResponseWriter, req *http.Request, err error) {
	p.s.writeError(w, req, err)
}
