package image

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Auth are the credentials of a pull, as CRI's AuthConfig carries them.
type Auth struct{ Username, Password, Auth, IdentityToken, RegistryToken string }

// PullOptions tune a pull.
type PullOptions struct {
	// Auth are the registry credentials; nil pulls anonymously. Bearer-token registries
	// are handled by the token exchange of go-containerregistry's transport.
	Auth *Auth
	// Insecure reports whether a registry ("host[:port]", "docker.io" for Docker Hub) is
	// insecure (Registries.Match): the pull then tries HTTPS and plain HTTP at once
	// (go-containerregistry's name.Insecure) and takes the first that answers, and the
	// registry's HTTPS certificate is not verified. Only requests to the registry's own
	// host skip verification: a token service or a blob redirect elsewhere is verified.
	// Registries on localhost or a loopback address may always use plain HTTP, as
	// containerd lets localhost do; their certificates are verified unless Insecure says so.
	Insecure func(registry string) bool
}

// Pull fetches ref from its registry over the OCI distribution protocol (for an index, the
// manifest of linux on this machine's architecture) and stores it. Concurrent pulls of the
// same reference in this process share one download. A reference the registry does not
// have gives an error that says "not found" and keeps the registry's own message.
func (s *Store) Pull(ctx context.Context, ref string, opts PullOptions) (Image, error) {
	r, err := parseReference(ref)
	if err != nil {
		return Image{}, fmt.Errorf("pull %s: %w", ref, err)
	}
	for attempt := 0; ; attempt++ {
		v, err, shared := s.flight.Do(r.String(), func() (any, error) { return s.pull(ctx, r, opts) })
		if err != nil && shared && attempt == 0 && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			continue // the pull we joined was canceled by its caller, not by ours: pull again
		}
		if err != nil {
			return Image{}, fmt.Errorf("pull %s: %w", ref, err)
		}
		return v.(Image), nil
	}
}

func (s *Store) pull(ctx context.Context, r reference, opts PullOptions) (Image, error) {
	release, err := s.holdOffGC()
	if err != nil {
		return Image{}, err
	}
	defer release()
	skipVerify := opts.Insecure != nil && opts.Insecure(r.registry)
	insecure := skipVerify || isLocalhost(r.registry)
	var nameOpts []name.Option
	if insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	gref, err := name.ParseReference(r.String(), nameOpts...)
	if err != nil {
		return Image{}, err
	}
	auth := authn.Anonymous
	if a := opts.Auth; a != nil {
		auth = authn.FromConfig(authn.AuthConfig{Username: a.Username, Password: a.Password, Auth: a.Auth,
			IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken})
	}
	guard := httpGuard{base: remote.DefaultTransport.(*http.Transport).Clone(), allowHTTP: insecure}
	if skipVerify {
		guard.unverified = remote.DefaultTransport.(*http.Transport).Clone()
		guard.unverified.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the registry is configured as insecure
		guard.registryHost = gref.Context().RegistryStr()
	}
	desc, err := remote.Get(gref,
		remote.WithContext(ctx),
		remote.WithAuth(auth),
		remote.WithTransport(guard),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}),
	)
	if err != nil {
		return Image{}, notFound(err)
	}
	img, err := desc.Image() // for an index: the manifest of our platform
	if err != nil {
		return Image{}, notFound(err)
	}
	var n names
	if r.digest != "" {
		n.digests = []string{r.String()}
	} else {
		n.tags = []string{r.String()}
		n.digests = []string{r.repo + "@" + desc.Digest.String()}
	}
	return s.importImage(ctx, img, n)
}

// notFound marks a registry's 404 so that the message says "not found", as containerd's does.
func notFound(err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return fmt.Errorf("not found: %w", err)
	}
	return err
}

// httpGuard refuses plain-HTTP requests to registries that are not insecure:
// go-containerregistry by itself also falls back to HTTP for private addresses. When
// unverified is set, HTTPS requests to registryHost go through it (no certificate check).
type httpGuard struct {
	base         http.RoundTripper
	allowHTTP    bool
	unverified   *http.Transport
	registryHost string
}

func (g httpGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !g.allowHTTP {
		return nil, fmt.Errorf("refusing plain HTTP to %s: the registry is not configured as insecure", req.URL.Host)
	}
	if g.unverified != nil && req.URL.Scheme == "https" && strings.EqualFold(req.URL.Host, g.registryHost) {
		return g.unverified.RoundTrip(req)
	}
	return g.base.RoundTrip(req)
}
