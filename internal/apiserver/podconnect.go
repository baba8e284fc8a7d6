package apiserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"

	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/streamproxy"
)

// The connect subresources of pods, as upstream's ExecREST, AttachREST and PortForwardREST:
// GET (WebSocket clients) and POST (SPDY clients).
const (
	subresourceExec        = "exec"
	subresourceAttach      = "attach"
	subresourcePortForward = "portforward"
)

// connectOptions are a connect request's options: PodExecOptions, PodAttachOptions or
// PodPortForwardOptions, read from the query.
type connectOptions struct {
	exec        *corev1.PodExecOptions
	attach      *corev1.PodAttachOptions
	portForward *corev1.PodPortForwardOptions
}

// parseConnectOptions reads the options of sub from the query; a value that does not parse
// is a BadRequest, as upstream's parameter decoding.
func parseConnectOptions(sub string, q url.Values) (connectOptions, error) {
	bools := func(names []string, dsts ...*bool) error {
		for i, n := range names {
			if v := q.Get(n); v != "" {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return apierrors.NewBadRequest(fmt.Sprintf("%s: %v", n, err))
				}
				*dsts[i] = b
			}
		}
		return nil
	}
	names := []string{"stdin", "stdout", "stderr", "tty"}
	switch sub {
	case subresourceExec:
		o := &corev1.PodExecOptions{Container: q.Get("container"), Command: q["command"]}
		if err := bools(names, &o.Stdin, &o.Stdout, &o.Stderr, &o.TTY); err != nil {
			return connectOptions{}, err
		}
		return connectOptions{exec: o}, nil
	case subresourceAttach:
		o := &corev1.PodAttachOptions{Container: q.Get("container")}
		if err := bools(names, &o.Stdin, &o.Stdout, &o.Stderr, &o.TTY); err != nil {
			return connectOptions{}, err
		}
		return connectOptions{attach: o}, nil
	default:
		o := &corev1.PodPortForwardOptions{}
		for _, v := range q["ports"] {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return connectOptions{}, apierrors.NewBadRequest(fmt.Sprintf("ports: %v", err))
			}
			o.Ports = append(o.Ports, int32(n))
		}
		return connectOptions{portForward: o}, nil
	}
}

// object is the options as an object with its kind, what admission sees.
func (o connectOptions) object() runtime.Object {
	var obj runtime.Object
	var kind string
	switch {
	case o.exec != nil:
		obj, kind = o.exec.DeepCopy(), "PodExecOptions"
	case o.attach != nil:
		obj, kind = o.attach.DeepCopy(), "PodAttachOptions"
	default:
		obj, kind = o.portForward.DeepCopy(), "PodPortForwardOptions"
	}
	obj.GetObjectKind().SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return obj
}

// streams are the streams an exec or attach asks for.
type streams struct{ stdin, stdout, stderr, tty bool }

func (o connectOptions) streams() streams {
	switch {
	case o.exec != nil:
		return streams{o.exec.Stdin, o.exec.Stdout, o.exec.Stderr, o.exec.TTY}
	case o.attach != nil:
		return streams{o.attach.Stdin, o.attach.Stdout, o.attach.Stderr, o.attach.TTY}
	}
	return streams{}
}

// kubeletQuery is the query the kubelet reads (upstream's streamParams): input, output,
// error and tty as "1", command repeated, ports joined.
func (o connectOptions) kubeletQuery() url.Values {
	q := url.Values{}
	st := o.streams()
	for _, p := range []struct {
		on   bool
		name string
	}{{st.stdin, "input"}, {st.stdout, "output"}, {st.stderr, "error"}, {st.tty, "tty"}} {
		if p.on {
			q.Set(p.name, "1")
		}
	}
	if o.exec != nil {
		for _, c := range o.exec.Command {
			q.Add("command", c)
		}
	}
	if o.portForward != nil && len(o.portForward.Ports) > 0 {
		ports := ""
		for i, p := range o.portForward.Ports {
			if i > 0 {
				ports += ","
			}
			ports += strconv.Itoa(int(p))
		}
		q.Set("ports", ports)
	}
	return q
}

// handlePodConnect serves pods/{name}/exec, attach and portforward: it checks the options
// and the container as upstream, finds the pod's kubelet and proxies the client's upgraded
// connection to the kubelet's /exec, /attach or /portForward. A WebSocket client of the
// v5.channel.k8s.io protocol (kubectl's first try) is served by translating its session to
// SPDY towards the kubelet (translateToSPDY); WebSocket tunnelling of port-forward is refused
// with 400, on which kubectl falls back to SPDY.
func (s *Server) handlePodConnect(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	if ri.verb != "get" && ri.verb != "create" {
		s.writeError(w, req, apierrors.NewMethodNotSupported(ri.res.GroupResource(), ri.verb))
		return
	}
	opts, err := parseConnectOptions(ri.subresource, req.URL.Query())
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	if ri.subresource != subresourcePortForward {
		if st := opts.streams(); !st.stdin && !st.stdout && !st.stderr {
			s.writeError(w, req, apierrors.NewBadRequest("you must specify at least 1 of stdin, stdout, stderr"))
			return
		}
	}
	ctx := req.Context()
	// Admission sees the connect with its options, before the pod is read, as upstream.
	attrs := s.admissionAttributes(ctx, ri.res, admission.Connect, ri.subresource, opts.object(), nil, false)
	attrs.Namespace, attrs.Name = ri.namespace, ri.name
	if err := s.cfg.Admission.Admit(ctx, attrs); err != nil {
		s.writeError(w, req, err)
		return
	}
	if err := s.cfg.Admission.Validate(ctx, attrs); err != nil {
		s.writeError(w, req, err)
		return
	}
	obj, _, err := s.getFromStorage(ctx, ri.res, ri.namespace, ri.name)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		s.writeError(w, req, apierrors.NewInternalError(fmt.Errorf("stored pod is a %T", obj)))
		return
	}
	container := ""
	switch {
	case opts.exec != nil:
		container = opts.exec.Container
	case opts.attach != nil:
		container = opts.attach.Container
	}
	if ri.subresource != subresourcePortForward {
		if container, err = logContainer(pod, container); err != nil {
			s.writeError(w, req, err)
			return
		}
	}
	if pod.Spec.NodeName == "" {
		s.writeError(w, req, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name)))
		return
	}
	if s.cfg.KubeletClientTLS == nil {
		s.writeError(w, req, apierrors.NewServiceUnavailable("the API server has no kubelet client certificate"))
		return
	}
	hostPort, err := s.kubeletHostPort(ctx, pod.Spec.NodeName)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	path := "/" + ri.subresource + "/" + url.PathEscape(pod.Namespace) + "/" + url.PathEscape(pod.Name) + "/" + url.PathEscape(container)
	if ri.subresource == subresourcePortForward {
		path = "/portForward/" + url.PathEscape(pod.Namespace) + "/" + url.PathEscape(pod.Name)
	}
	loc := &url.URL{Scheme: "https", Host: hostPort, Path: path, RawQuery: opts.kubeletQuery().Encode()}
	tlsCfg := s.cfg.KubeletClientTLS.Clone()
	if tlsCfg.MinVersion == 0 {
		tlsCfg.MinVersion = tls.VersionTLS12
	}
	w = streamproxy.ResponseWriter(w) // hijackable below the server's wrappers, closed gracefully
	switch {
	case wsstream.IsWebSocketRequestWithTunnelingProtocol(req):
		s.writeError(w, req, apierrors.NewBadRequest("port forwarding over WebSockets is not served; use SPDY"))
		return
	case ri.subresource != subresourcePortForward && wsstream.IsWebSocketRequestWithStreamCloseProtocol(req):
		s.translateToSPDY(w, req, loc, tlsCfg, opts.streams())
		return
	}
	// SPDY (POST), and WebSocket clients of the older channel protocols, which the runtime's
	// streaming server speaks itself.
	streamproxy.Handler(loc, tlsCfg, connectResponder{s}).ServeHTTP(w, req)
}

// kubeletHostPort is host:port of a node's kubelet: its InternalIP and published port.
func (s *Server) kubeletHostPort(ctx context.Context, nodeName string) (string, error) {
	nodes, _ := s.table.Lookup(schemaCoreV1, "nodes")
	obj, _, err := s.getFromStorage(ctx, nodes, "", nodeName)
	if err != nil {
		return "", err
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return "", apierrors.NewInternalError(fmt.Errorf("stored node is a %T", obj))
	}
	host := ""
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address != "" {
			host = a.Address
			break
		}
	}
	if host == "" {
		return "", apierrors.NewInternalError(fmt.Errorf("no preferred addresses found; known addresses: %v", node.Status.Addresses))
	}
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port <= 0 {
		port = defaultKubeletPort
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port))), nil
}

// connectResponder answers a failure to reach the kubelet.
type connectResponder struct{ s *Server }

func (c connectResponder) Error(w http.ResponseWriter, req *http.Request, err error) {
	c.s.writeError(w, req, apierrors.NewInternalError(fmt.Errorf("error dialing backend: %w", err)))
}
