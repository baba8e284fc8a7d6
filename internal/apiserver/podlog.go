package apiserver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// defaultKubeletPort is used when a Node does not publish its kubelet's port.
const defaultKubeletPort = 10250

// handlePodLog serves GET pods/{name}/log: it checks the options and the container as upstream,
// finds the pod's node and proxies to the kubelet's /containerLogs, streaming the answer.
func (s *Server) handlePodLog(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	if ri.verb != "get" {
		s.writeError(w, req, apierrors.NewMethodNotSupported(ri.res.GroupResource(), ri.verb))
		return
	}
	ctx := req.Context()
	opts, err := parsePodLogOptions(req.URL.Query())
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	if errs := validatePodLogOptions(opts); len(errs) > 0 {
		s.writeError(w, req, apierrors.NewInvalid(schema.GroupKind{Kind: "PodLogOptions"}, ri.name, errs))
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
	if opts.Container, err = logContainer(pod, opts.Container); err != nil {
		s.writeError(w, req, err)
		return
	}
	if pod.Spec.NodeName == "" {
		// Upstream answers an unscheduled pod with no content: there is no log yet.
		w.WriteHeader(http.StatusNoContent)
		return
	}
	loc, err := s.kubeletLogURL(ctx, pod, opts)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	s.proxyPodLog(w, req, ri.name, loc, opts.InsecureSkipTLSVerifyBackend)
}

// parsePodLogOptions reads PodLogOptions from the query; a value that does not parse is a
// BadRequest, as upstream's parameter decoding.
func parsePodLogOptions(q url.Values) (*corev1.PodLogOptions, error) {
	o := &corev1.PodLogOptions{Container: q.Get("container")}
	bools := []struct {
		name string
		dst  *bool
	}{{"follow", &o.Follow}, {"previous", &o.Previous}, {"timestamps", &o.Timestamps}, {"insecureSkipTLSVerifyBackend", &o.InsecureSkipTLSVerifyBackend}}
	for _, b := range bools {
		if v := q.Get(b.name); v != "" {
			p, err := strconv.ParseBool(v)
			if err != nil {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: %v", b.name, err))
			}
			*b.dst = p
		}
	}
	ints := []struct {
		name string
		dst  **int64
	}{{"sinceSeconds", &o.SinceSeconds}, {"tailLines", &o.TailLines}, {"limitBytes", &o.LimitBytes}}
	for _, i := range ints {
		if v := q.Get(i.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: %v", i.name, err))
			}
			*i.dst = &n
		}
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("sinceTime: %v", err))
		}
		mt := metav1.NewTime(t)
		o.SinceTime = &mt
	}
	return o, nil
}

// validatePodLogOptions checks the options as upstream's ValidatePodLogOptions.
func validatePodLogOptions(o *corev1.PodLogOptions) field.ErrorList {
	var errs field.ErrorList
	if o.TailLines != nil && *o.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *o.TailLines, "must be greater than or equal to 0"))
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *o.LimitBytes, "must be greater than 0"))
	}
	switch {
	case o.SinceSeconds != nil && o.SinceTime != nil:
		errs = append(errs, field.Forbidden(field.NewPath(""), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	case o.SinceSeconds != nil && *o.SinceSeconds < 1:
		errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), *o.SinceSeconds, "must be greater than 0"))
	}
	return errs
}

// logContainer returns the container whose log is asked for: the named one, which must
// exist, or the pod's only container.
func logContainer(pod *corev1.Pod, name string) (string, error) {
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names = append(names, c.Name)
	}
	if name == "" {
		switch len(pod.Spec.Containers) {
		case 1:
			return pod.Spec.Containers[0].Name, nil
		case 0:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
		default:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %s", pod.Name, names))
		}
	}
	for _, n := range names {
		if n == name {
			return name, nil
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
}

// kubeletLogURL is the kubelet's /containerLogs URL for the pod's container on its node.
func (s *Server) kubeletLogURL(ctx context.Context, pod *corev1.Pod, opts *corev1.PodLogOptions) (*url.URL, error) {
	nodes, _ := s.table.Lookup(schemaCoreV1, "nodes")
	obj, _, err := s.getFromStorage(ctx, nodes, "", pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("stored node is a %T", obj))
	}
	host := ""
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address != "" {
			host = a.Address
			break
		}
	}
	if host == "" {
		return nil, apierrors.NewInternalError(fmt.Errorf("no preferred addresses found; known addresses: %v", node.Status.Addresses))
	}
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port <= 0 {
		port = defaultKubeletPort
	}
	q := url.Values{}
	if opts.Follow {
		q.Set("follow", "true")
	}
	if opts.Previous {
		q.Set("previous", "true")
	}
	if opts.Timestamps {
		q.Set("timestamps", "true")
	}
	if opts.SinceSeconds != nil {
		q.Set("sinceSeconds", strconv.FormatInt(*opts.SinceSeconds, 10))
	}
	if opts.SinceTime != nil {
		q.Set("sinceTime", opts.SinceTime.UTC().Format(time.RFC3339))
	}
	if opts.TailLines != nil {
		q.Set("tailLines", strconv.FormatInt(*opts.TailLines, 10))
	}
	if opts.LimitBytes != nil {
		q.Set("limitBytes", strconv.FormatInt(*opts.LimitBytes, 10))
	}
	return &url.URL{
		Scheme:   "https",
		Host:     net.JoinHostPort(host, strconv.Itoa(int(port))),
		Path:     "/containerLogs/" + url.PathEscape(pod.Namespace) + "/" + url.PathEscape(pod.Name) + "/" + url.PathEscape(opts.Container),
		RawQuery: q.Encode(),
	}, nil
}

// proxyPodLog asks the kubelet at loc and streams its answer, flushing as data arrives.
// insecure skips checking the kubelet's serving certificate (insecureSkipTLSVerifyBackend).
// A WebSocket client gets the log as WebSocket messages (serveStreamOverWebSocket).
func (s *Server) proxyPodLog(w http.ResponseWriter, req *http.Request, name string, loc *url.URL, insecure bool) {
	if s.cfg.KubeletClientTLS == nil {
		s.writeError(w, req, apierrors.NewServiceUnavailable("the API server has no kubelet client certificate"))
		return
	}
	tlsCfg := s.cfg.KubeletClientTLS.Clone()
	if tlsCfg.MinVersion == 0 {
		tlsCfg.MinVersion = tls.VersionTLS12
	}
	if insecure {
		tlsCfg.InsecureSkipVerify = true
	}
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsCfg,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
	}
	defer tr.CloseIdleConnections()
	kreq, err := http.NewRequestWithContext(req.Context(), http.MethodGet, loc.String(), nil)
	if err != nil {
		s.writeError(w, req, apierrors.NewInternalError(err))
		return
	}
	resp, err := tr.RoundTrip(kreq)
	if err != nil {
		s.writeError(w, req, apierrors.NewInternalError(fmt.Errorf("get logs from kubelet %s: %w", loc.Host, err)))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode < http.StatusOK || resp.StatusCode > http.StatusPartialContent {
		s.writeError(w, req, kubeletError(resp, name))
		return
	}
	if wsstream.IsWebSocketRequest(req) {
		s.serveStreamOverWebSocket(w, req, resp.Body)
		return
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	} else {
		w.Header().Set("Content-Type", "text/plain")
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && req.Context().Err() == nil {
				s.log.Warn("pod log stream from kubelet ended", "url", loc.Redacted(), "err", err)
			}
			return
		}
	}
}

// kubeletError turns a kubelet's error answer into an API error: its Status when it sent
// one, else the body's text with the answer's code, as upstream's response checker.
func kubeletError(resp *http.Response, name string) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("read kubelet error: %w", err))
	}
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Message != "" {
		if st.Code == 0 {
			st.Code = int32(resp.StatusCode)
		}
		return &apierrors.StatusError{ErrStatus: st}
	}
	text := string(body)
	switch resp.StatusCode {
	case http.StatusInternalServerError:
		return apierrors.NewInternalError(errors.New(text))
	case http.StatusBadRequest:
		return apierrors.NewBadRequest(text)
	}
	return apierrors.NewGenericServerResponse(resp.StatusCode, "", schema.GroupResource{Resource: "pods/log"}, name, text, 0, false)
}
