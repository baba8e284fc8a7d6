package image

import (
	"fmt"
	"net"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// reference is an image reference normalised as CRI and containerd do:
// "busybox" is "docker.io/library/busybox:latest".
type reference struct {
	registry string // "docker.io", "localhost:5000"
	repo     string // "docker.io/library/busybox"
	tag      string // "latest", or "" for a digest reference
	digest   string // "sha256:...", or ""
}

// parseReference parses and normalises an image reference.
func parseReference(s string) (reference, error) {
	r, err := name.ParseReference(s)
	if err != nil {
		return reference{}, fmt.Errorf("invalid image reference %q: %w", s, err)
	}
	reg := r.Context().RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	out := reference{registry: reg, repo: reg + "/" + r.Context().RepositoryStr()}
	switch r := r.(type) {
	case name.Digest:
		out.digest = r.DigestStr()
	case name.Tag:
		out.tag = r.TagStr()
	}
	return out, nil
}

// String is the normalised reference: repo:tag or repo@digest.
func (r reference) String() string {
	if r.digest != "" {
		return r.repo + "@" + r.digest
	}
	return r.repo + ":" + r.tag
}

// isLocalhost reports whether a registry ("host[:port]") is on this machine; such
// registries are reached over plain HTTP when HTTPS fails, as containerd does for localhost.
func isLocalhost(registry string) bool {
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
