// Package forward runs client-go's port forwarder in tests of the port-forward
// path (API server, kubelet, runtime streaming server): a local port that
// reaches a pod's port through a streaming dialer. Only tests import it.
package forward

import (
	"bytes"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// SPDYDialer returns a SPDY dialer that POSTs to u with cfg's transport (TLS and
// credentials); an empty cfg suits plain HTTP without authentication.
func SPDYDialer(t testing.TB, cfg *rest.Config, u *url.URL) httpstream.Dialer {
	t.Helper()
	tr, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatalf("SPDY round tripper: %v", err)
	}
	return spdy.NewDialer(upgrader, &http.Client{Transport: tr}, http.MethodPost, u)
}

// Session is a running forwarder of one local port.
type Session struct {
	// Local is the local port on 127.0.0.1 that reaches the remote port.
	Local uint16
	mu    sync.Mutex
	logs  bytes.Buffer
}

// Write takes the forwarder's own output (kept for failure messages).
func (s *Session) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.Write(p)
}

// Logs is what the forwarder printed so far.
func (s *Session) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// Start forwards a free local port on 127.0.0.1 to remotePort through dialer
// until t ends, and returns once the forwarder listens.
func Start(t testing.TB, dialer httpstream.Dialer, remotePort string) *Session {
	t.Helper()
	s := &Session{}
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + remotePort}, stop, ready, s, s)
	if err != nil {
		t.Fatalf("port forwarder: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("ForwardPorts: %v (%s)", err, s.Logs())
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("GetPorts = %v, %v", ports, err)
	}
	s.Local = ports[0].Local
	return s
}
