package cri

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/runtime/image"
	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/kubette/kubette/internal/testenv/testimage"
)

// hostIPv4 is the first non-loopback IPv4 address of this machine's interfaces.
func hostIPv4(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatalf("interface addresses: %v", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP
		}
	}
	msg := "needs a non-loopback IPv4 address on an interface of this machine (for a registry that is not localhost)"
	if needs.InCI() {
		t.Fatal("CI must provide this: " + msg)
	}
	t.Skip("skipping: " + msg)
	return nil
}

// TestPullImageInsecureRegistry: a plain-HTTP registry on this machine's non-loopback address
// is pulled from only when Config.InsecureRegistries names it.
func TestPullImageInsecureRegistry(t *testing.T) {
	ip := hostIPv4(t)
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	host := testimage.RegistryOn(t, l)
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(host+"/team/app:v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	store, err := image.Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.cfg.Images = store
	e.restart()
	req := &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: host + "/team/app:v1"}}

	// Not insecure: HTTPS to a plain-HTTP server fails, and plain HTTP is not tried (or, for
	// a private address, which go-containerregistry would try, refused).
	resp, err := e.srv.PullImage(t.Context(), req)
	if err == nil {
		t.Fatalf("pull from %s without --insecure-registry: %v", host, resp)
	}
	if msg := err.Error(); !strings.Contains(msg, "failed to pull image") || !strings.Contains(msg, host) ||
		!(strings.Contains(msg, "HTTP response to HTTPS client") || strings.Contains(msg, "refusing plain HTTP")) {
		t.Errorf("pull from %s without --insecure-registry: %v, want the registry's error", host, err)
	}

	// Another registry marked insecure changes nothing.
	e.cfg.InsecureRegistries, err = image.ParseRegistries([]string{net.JoinHostPort(ip.String(), "1")})
	if err != nil {
		t.Fatal(err)
	}
	e.restart()
	if _, err := e.srv.PullImage(t.Context(), req); err == nil {
		t.Errorf("pull from %s with only %s:1 insecure worked", host, ip)
	}

	// Marked insecure: the pull works over plain HTTP.
	e.cfg.InsecureRegistries, err = image.ParseRegistries([]string{host})
	if err != nil {
		t.Fatal(err)
	}
	e.restart()
	resp, err = e.srv.PullImage(t.Context(), req)
	if err != nil {
		t.Fatalf("pull from %s with --insecure-registry %s: %v", host, host, err)
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetImageRef() != cfgName.String() {
		t.Errorf("pulled %s, want %s", resp.GetImageRef(), cfgName)
	}
	st, err := e.srv.ImageStatus(t.Context(), &runtimeapi.ImageStatusRequest{Image: req.GetImage()})
	if err != nil || st.GetImage().GetId() != cfgName.String() {
		t.Errorf("ImageStatus after the pull: %v, %v", st, err)
	}
}
