package testimage

import (
	"io"
	"log"
	"net"
	"net/http/httptest"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry starts an in-memory OCI registry on 127.0.0.1 (plain HTTP) for the rest of the
// test and returns its "127.0.0.1:PORT".
func Registry(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// RegistryOn starts the same registry on a listener of the test's (e.g. one on a non-loopback
// address, which pulls reach only as an insecure registry) and returns its "HOST:PORT".
func RegistryOn(t testing.TB, l net.Listener) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return l.Addr().String()
}

// Push uploads img to the registry at host as repoTag ("app:v1", "team/app:v1").
func Push(t testing.TB, host, repoTag string, img v1.Image) {
	t.Helper()
	ref, err := name.ParseReference(host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatalf("push: reference %s/%s: %v", host, repoTag, err)
	}
	if err := remote.Write(ref, img, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}
