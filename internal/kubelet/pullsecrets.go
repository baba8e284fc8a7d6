package kubelet

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// dockerAuth is one registry's entry in a docker config.
type dockerAuth struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// pullAuths returns the credentials of the pod's imagePullSecrets that match the image's
// registry (and path), most specific first. Secrets that are missing or unreadable are
// skipped, as upstream does: the pull may still succeed anonymously.
func (k *Kubelet) pullAuths(ctx context.Context, pod *v1.Pod, image string) []*runtimeapi.AuthConfig {
	type match struct {
		keyLen int
		auth   *runtimeapi.AuthConfig
	}
	var out []match
	target := imageLocation(image)
	for _, ref := range pod.Spec.ImagePullSecrets {
		s, err := k.cfg.Client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			k.log.Warn("image pull secret", "pod", podFullName(pod), "secret", ref.Name, "err", err)
			continue
		}
		for key, a := range dockerAuths(s) {
			loc := registryKey(key)
			if target != loc && !strings.HasPrefix(target, loc+"/") {
				continue
			}
			out = append(out, match{len(loc), authConfig(loc, a)})
		}
	}
	// Longest (most specific) key first; stable for equal lengths.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].keyLen > out[j-1].keyLen; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	auths := make([]*runtimeapi.AuthConfig, len(out))
	for i, m := range out {
		auths[i] = m.auth
	}
	return auths
}

// dockerAuths reads a dockerconfigjson or dockercfg secret.
func dockerAuths(s *v1.Secret) map[string]dockerAuth {
	if b, ok := s.Data[v1.DockerConfigJsonKey]; ok {
		var cfg struct {
			Auths map[string]dockerAuth `json:"auths"`
		}
		if json.Unmarshal(b, &cfg) == nil {
			return cfg.Auths
		}
	}
	if b, ok := s.Data[v1.DockerConfigKey]; ok {
		var cfg map[string]dockerAuth
		if json.Unmarshal(b, &cfg) == nil {
			return cfg
		}
	}
	return nil
}

func authConfig(server string, a dockerAuth) *runtimeapi.AuthConfig {
	c := &runtimeapi.AuthConfig{
		Username: a.Username, Password: a.Password, Auth: a.Auth,
		ServerAddress: server, IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken,
	}
	if c.Username == "" && c.Auth != "" {
		if dec, err := base64.StdEncoding.DecodeString(c.Auth); err == nil {
			if u, p, ok := strings.Cut(string(dec), ":"); ok {
				c.Username, c.Password = u, p
			}
		}
	}
	return c
}

// imageLocation is an image reference's registry host and repository path, with Docker
// Hub's defaults: "busybox" → "docker.io/library/busybox".
func imageLocation(image string) string {
	name := image
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndexByte(name, ':'); i >= 0 && !strings.Contains(name[i:], "/") {
		name = name[:i]
	}
	host, rest, ok := strings.Cut(name, "/")
	if !ok || (!strings.ContainsAny(host, ".:") && host != "localhost") {
		host, rest = "docker.io", name
		if !strings.Contains(rest, "/") {
			rest = "library/" + rest
		}
	}
	if host == "index.docker.io" || host == "registry-1.docker.io" {
		host = "docker.io"
	}
	return host + "/" + rest
}

// registryKey normalises a docker config key: no scheme, no /v1/ or /v2/ suffix, Docker
// Hub's aliases as docker.io.
func registryKey(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	key = strings.TrimSuffix(key, "/")
	for _, suffix := range []string{"/v1", "/v2"} {
		key = strings.TrimSuffix(key, suffix)
	}
	host, rest, _ := strings.Cut(key, "/")
	if host == "index.docker.io" || host == "registry-1.docker.io" {
		host = "docker.io"
	}
	if rest == "" {
		return host
	}
	return host + "/" + rest
}
