package cluster

import (
	"context"
	"strings"
	"testing"
)

// Start refuses an ingress controller without nginx before anything starts, naming the
// package to install.
func TestStartRefusesIngressWithoutNginx(t *testing.T) {
	_, err := Start(context.Background(), Config{Ingress: &IngressConfig{NginxBinary: "/nonexistent/nginx"}})
	if err == nil {
		t.Fatal("Start with an ingress controller but no nginx succeeded")
	}
	for _, want := range []string{"apt-get install -y nginx", "--ingress=false"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
