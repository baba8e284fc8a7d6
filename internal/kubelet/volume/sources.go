package volume

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/kubelet/fieldpath"
)

// defaultFileMode is the mode of configMap, secret, downwardAPI and projected files without
// a defaultMode (upstream's *VolumeSourceDefaultMode).
const defaultFileMode = 0o644

// defaultModeOf returns a volume's defaultMode, or 0644.
func defaultModeOf(m *int32) os.FileMode {
	if m == nil {
		return defaultFileMode
	}
	return os.FileMode(*m) & os.ModePerm
}

// modeOf returns an item's mode, or the volume's default.
func modeOf(m *int32, def os.FileMode) os.FileMode {
	if m == nil {
		return def
	}
	return os.FileMode(*m) & os.ModePerm
}

// The group resources of the kubelet's errors: upstream's configMap and secret managers name
// them in the singular ("configmap \"x\" not found").
var (
	configMapResource = schema.GroupResource{Resource: "configmap"}
	secretResource    = schema.GroupResource{Resource: "secret"}
)

// getConfigMap reads a ConfigMap; a missing one is nil with optional, upstream's error without.
func (m *Manager) getConfigMap(ctx context.Context, ns, name string, optional *bool) (*v1.ConfigMap, error) {
	if m.client == nil {
		return nil, errors.New("this volume manager has no API client")
	}
	cm, err := m.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if optional != nil && *optional {
			return nil, nil
		}
		return nil, apierrors.NewNotFound(configMapResource, name)
	}
	if err != nil {
		return nil, fmt.Errorf("get configmap %q: %w", name, err)
	}
	return cm, nil
}

// getSecret reads a Secret; a missing one is nil with optional, upstream's error without.
func (m *Manager) getSecret(ctx context.Context, ns, name string, optional *bool) (*v1.Secret, error) {
	if m.client == nil {
		return nil, errors.New("this volume manager has no API client")
	}
	s, err := m.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if optional != nil && *optional {
			return nil, nil
		}
		return nil, apierrors.NewNotFound(secretResource, name)
	}
	if err != nil {
		return nil, fmt.Errorf("get secret %q: %w", name, err)
	}
	return s, nil
}

// configMapPayload builds a configMap volume's files.
func (m *Manager) configMapPayload(ctx context.Context, ns string, src *v1.ConfigMapVolumeSource) (map[string]File, error) {
	cm, err := m.getConfigMap(ctx, ns, src.Name, src.Optional)
	if err != nil {
		return nil, err
	}
	return configMapFiles(cm, src.Items, defaultModeOf(src.DefaultMode), src.Optional)
}

// configMapFiles maps a ConfigMap's keys (all, or the items) to files.
func configMapFiles(cm *v1.ConfigMap, items []v1.KeyToPath, def os.FileMode, optional *bool) (map[string]File, error) {
	out := map[string]File{}
	if cm == nil {
		return out, nil
	}
	if len(items) == 0 {
		for k, v := range cm.Data {
			out[k] = File{Data: []byte(v), Mode: def}
		}
		for k, v := range cm.BinaryData {
			out[k] = File{Data: v, Mode: def}
		}
		return out, nil
	}
	for _, it := range items {
		var data []byte
		if v, ok := cm.Data[it.Key]; ok {
			data = []byte(v)
		} else if v, ok := cm.BinaryData[it.Key]; ok {
			data = v
		} else {
			if optional != nil && *optional {
				continue
			}
			return nil, fmt.Errorf("configmap references non-existent config key: %s", it.Key)
		}
		out[it.Path] = File{Data: data, Mode: modeOf(it.Mode, def)}
	}
	return out, nil
}

// secretPayload builds a secret volume's files.
func (m *Manager) secretPayload(ctx context.Context, ns string, src *v1.SecretVolumeSource) (map[string]File, error) {
	s, err := m.getSecret(ctx, ns, src.SecretName, src.Optional)
	if err != nil {
		return nil, err
	}
	return secretFiles(s, src.Items, defaultModeOf(src.DefaultMode), src.Optional)
}

// secretFiles maps a Secret's keys (all, or the items) to files.
func secretFiles(s *v1.Secret, items []v1.KeyToPath, def os.FileMode, optional *bool) (map[string]File, error) {
	out := map[string]File{}
	if s == nil {
		return out, nil
	}
	if len(items) == 0 {
		for k, v := range s.Data {
			out[k] = File{Data: v, Mode: def}
		}
		for k, v := range s.StringData {
			out[k] = File{Data: []byte(v), Mode: def}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := s.Data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return nil, fmt.Errorf("references non-existent secret key: %s", it.Key)
		}
		out[it.Path] = File{Data: v, Mode: modeOf(it.Mode, def)}
	}
	return out, nil
}

// downwardAPIPayload builds a downwardAPI volume's files from the pod.
func downwardAPIPayload(pod *v1.Pod, allocatable v1.ResourceList, items []v1.DownwardAPIVolumeFile, def os.FileMode) (map[string]File, error) {
	out := map[string]File{}
	for _, it := range items {
		var val string
		var err error
		switch {
		case it.FieldRef != nil:
			val, err = podFieldValue(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			val, err = containerResourceValue(pod, allocatable, it.ResourceFieldRef)
		default:
			err = errors.New("downwardAPI item has neither fieldRef nor resourceFieldRef")
		}
		if err != nil {
			return nil, fmt.Errorf("downwardAPI %s: %w", it.Path, err)
		}
		out[it.Path] = File{Data: []byte(val), Mode: modeOf(it.Mode, def)}
	}
	return out, nil
}

// podFieldValue resolves a downward API field path of the pod.
func podFieldValue(pod *v1.Pod, path string) (string, error) {
	ips := fieldpath.IPs{HostIP: pod.Status.HostIP, PodIP: pod.Status.PodIP,
		HostIPs: make([]string, 0, len(pod.Status.HostIPs)), PodIPs: make([]string, 0, len(pod.Status.PodIPs))}
	for _, ip := range pod.Status.HostIPs {
		ips.HostIPs = append(ips.HostIPs, ip.IP)
	}
	for _, ip := range pod.Status.PodIPs {
		ips.PodIPs = append(ips.PodIPs, ip.IP)
	}
	v, err := fieldpath.Pod(pod, ips, path)
	if errors.Is(err, fieldpath.ErrUnsupported) {
		return "", fmt.Errorf("unsupported fieldPath: %s", path)
	}
	return v, err
}

// containerResourceValue resolves a resourceFieldRef of the container it names; a limit the
// container does not set is the node's allocatable (fieldpath.ContainerResource).
func containerResourceValue(pod *v1.Pod, allocatable v1.ResourceList, ref *v1.ResourceFieldSelector) (string, error) {
	c, ok := fieldpath.Container(pod, ref.ContainerName)
	if !ok {
		return "", fmt.Errorf("container %q not found", ref.ContainerName)
	}
	return fieldpath.ContainerResource(c, allocatable, ref.Resource, ref.Divisor)
}

// projectedPayload builds a projected volume's files from its sources.
func (m *Manager) projectedPayload(ctx context.Context, pod *v1.Pod, allocatable v1.ResourceList, src *v1.ProjectedVolumeSource) (map[string]File, error) {
	def := defaultModeOf(src.DefaultMode)
	out := map[string]File{}
	add := func(files map[string]File) {
		for p, f := range files {
			out[p] = f
		}
	}
	for _, s := range src.Sources {
		switch {
		case s.ConfigMap != nil:
			cm, err := m.getConfigMap(ctx, pod.Namespace, s.ConfigMap.Name, s.ConfigMap.Optional)
			if err != nil {
				return nil, err
			}
			files, err := configMapFiles(cm, s.ConfigMap.Items, def, s.ConfigMap.Optional)
			if err != nil {
				return nil, err
			}
			add(files)
		case s.Secret != nil:
			sec, err := m.getSecret(ctx, pod.Namespace, s.Secret.Name, s.Secret.Optional)
			if err != nil {
				return nil, err
			}
			files, err := secretFiles(sec, s.Secret.Items, def, s.Secret.Optional)
			if err != nil {
				return nil, err
			}
			add(files)
		case s.DownwardAPI != nil:
			files, err := downwardAPIPayload(pod, allocatable, s.DownwardAPI.Items, def)
			if err != nil {
				return nil, err
			}
			add(files)
		case s.ServiceAccountToken != nil:
			f, err := m.serviceAccountToken(ctx, pod, s.ServiceAccountToken, def)
			if err != nil {
				return nil, err
			}
			out[s.ServiceAccountToken.Path] = f
		default:
			return nil, errors.New("unsupported projected volume source (configMap, secret, downwardAPI and serviceAccountToken are)")
		}
	}
	return out, nil
}

// serviceAccountToken returns the token file of a serviceAccountToken projection: the one on
// disk until 80% of its lifetime passed (upstream's refresh point), else a new one from the
// TokenRequest API bound to the pod.
func (m *Manager) serviceAccountToken(ctx context.Context, pod *v1.Pod, src *v1.ServiceAccountTokenProjection, def os.FileMode) (File, error) {
	ttl := int64(3600)
	if src.ExpirationSeconds != nil {
		ttl = *src.ExpirationSeconds
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != src {
				continue
			}
			dir, err := m.volumeDir(pod.UID, PluginProjected, v.Name)
			if err != nil {
				return File{}, err
			}
			p := filepath.Join(dir, dataDirName, src.Path)
			if b, err := os.ReadFile(p); err == nil && tokenFresh(b, time.Now()) {
				return File{Data: b, Mode: def}, nil
			}
		}
	}
	if m.client == nil {
		return File{}, errors.New("this volume manager has no API client")
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	var aud []string
	if src.Audience != "" {
		aud = []string{src.Audience}
	}
	tr, err := m.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         aud,
			ExpirationSeconds: &ttl,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return File{}, fmt.Errorf("request token for service account %q: %w", sa, err)
	}
	return File{Data: []byte(tr.Status.Token), Mode: def}, nil
}

// tokenFresh tells whether a JWT's iat/exp claims say that less than 80% of its lifetime has
// passed at now. A token it cannot read is not fresh.
func tokenFresh(token []byte, now time.Time) bool {
	parts := strings.Split(strings.TrimSpace(string(token)), ".")
	if len(parts) != 3 {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return false
	}
	var claims struct {
		IssuedAt  int64 `json:"iat"`
		ExpiresAt int64 `json:"exp"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil || claims.ExpiresAt <= claims.IssuedAt {
		return false
	}
	refresh := claims.IssuedAt + (claims.ExpiresAt-claims.IssuedAt)*8/10
	return now.Unix() < refresh
}
