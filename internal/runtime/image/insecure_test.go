package image

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func TestRegistriesMatch(t *testing.T) {
	r, err := ParseRegistries([]string{
		"myreg.example.com", "Ports.Example:5000", "web.example:443", "plain.example:80",
		"10.1.2.3:5000", "10.9.9.9", "[fd00::1]:5000", "fd00::2", "[fd00::3]",
		"172.20.0.0/16", "fd10::/16", " spaced.example ",
	})
	if err != nil {
		t.Fatal(err)
	}
	for reg, want := range map[string]bool{
		// host without a port in the entry: every port
		"myreg.example.com": true, "myreg.example.com:5000": true, "MYREG.example.com:443": true,
		"other.example.com": false, "sub.myreg.example.com": false, "myreg.example": false,
		// host:port: that port; case-insensitive names
		"ports.example:5000": true, "ports.example:5001": false, "ports.example": false,
		// a registry without a port is reached on 443 or 80
		"web.example": true, "web.example:443": true, "web.example:5000": false,
		"plain.example": true, "plain.example:80": true, "plain.example:8080": false,
		// IPv4
		"10.1.2.3:5000": true, "10.1.2.3:5001": false, "10.1.2.3": false,
		"10.9.9.9": true, "10.9.9.9:1234": true, "10.9.9.8:1234": false,
		// IPv6 in brackets, compared by value
		"[fd00::1]:5000": true, "[fd00:0:0::1]:5000": true, "[fd00::1]:5001": false, "[fd00::1]": false,
		"[fd00::2]": true, "[fd00::2]:80": true, "[fd00::3]:9": true, "[fd00::4]:5000": false,
		// CIDRs: addresses only, every port; names are not resolved
		"172.20.3.4:5000": true, "172.20.255.255": true, "172.21.0.1:5000": false,
		"[fd10:1::5]:5000": true, "[fd11::5]:5000": false, "localhost:5000": false,
		"spaced.example": true,
		// not registries
		"": false, "[fd00::1": false, "10.1.2.3:": false, "10.1.2.3:x": false, "docker.io": false,
	} {
		if got := r.Match(reg); got != want {
			t.Errorf("Match(%q) = %v, want %v", reg, got, want)
		}
	}
	if (Registries{}).Match("myreg.example.com") {
		t.Error("the zero Registries matched")
	}
	if r.Len() != 12 {
		t.Errorf("Len = %d", r.Len())
	}
}

func TestParseRegistriesRejects(t *testing.T) {
	for entry, why := range map[string]string{
		"":                       "empty",
		"  ":                     "empty",
		"http://myreg:5000":      "scheme",
		"https://myreg":          "scheme",
		"myreg:5000/path":        "CIDR",
		"10.0.0.0/33":            "CIDR",
		"*.example.com":          "wildcard",
		"myreg:0":                "port",
		"myreg:65536":            "port",
		"myreg:+80":              "port",
		"myreg:http":             "port",
		"myreg:":                 "port",
		"[fd00::1":               "port",
		"[fd00::1]x":             "port",
		"[fd00::1]:":             "port",
		"[10.0.0.1]:5000":        "brackets",
		"[myreg]:5000":           "brackets",
		"fd00::1:5000:":          "IPv6",
		"fe80::1%eth0":           "IPv6",
		"my_reg":                 "not allowed",
		"-myreg":                 "not allowed",
		"myreg-.example":         "not allowed",
		"my..reg":                "label",
		"myreg:5000:6000":        "IPv6",
		"reg.example:5000 extra": "port",
	} {
		_, err := ParseRegistries([]string{"ok.example", entry})
		if err == nil {
			t.Errorf("ParseRegistries accepted %q", entry)
			continue
		}
		if !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "insecure registry") {
			t.Errorf("ParseRegistries(%q): %v, want a message about %q", entry, err, why)
		}
	}
}

// TestPullInsecureSkipsVerification: an HTTPS registry with a certificate no one signed (on
// 127.0.0.1, where plain HTTP is allowed anyway) is pulled only when it is insecure.
func TestPullInsecureSkipsVerification(t *testing.T) {
	srv := httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := srv.Listener.Addr().String()
	ref, err := name.ParseReference(host + "/app:1")
	if err != nil {
		t.Fatal(err)
	}
	img := imageOf(t, nil, layerOf(t, entry{name: "x"}))
	if err := remote.Write(ref, img, remote.WithContext(t.Context()), remote.WithTransport(srv.Client().Transport)); err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	_, err = s.Pull(t.Context(), host+"/app:1", PullOptions{})
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("pull from an HTTPS registry with an unknown certificate: %v, want a certificate error", err)
	}
	regs, err := ParseRegistries([]string{host})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pull(t.Context(), host+"/app:1", PullOptions{Insecure: regs.Match}); err != nil {
		t.Errorf("pull with the registry insecure: %v", err)
	}
}

// TestHTTPGuardSkipsVerificationForTheRegistryOnly: requests to other hosts (a token service,
// a blob redirect) keep verifying certificates.
func TestHTTPGuardSkipsVerificationForTheRegistryOnly(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	port = ":" + port
	unverified := http.DefaultTransport.(*http.Transport).Clone()
	unverified.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the test's point
	t.Cleanup(unverified.CloseIdleConnections)
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	g := httpGuard{base: base, unverified: unverified, registryHost: "127.0.0.1" + port}
	for host, wantOK := range map[string]bool{"127.0.0.1" + port: true, "localhost" + port: false} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+host+"/v2/", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := g.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		if (err == nil) != wantOK {
			t.Errorf("GET https://%s/v2/ with the registry %s insecure: %v", host, g.registryHost, err)
		}
	}
}
