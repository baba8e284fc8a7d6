package kubelet

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/kubelet/fieldpath"
)

// envInputs is what a container's environment may refer to besides the pod itself.
type envInputs struct {
	client      kubernetes.Interface
	podIPs      []string
	hostIPs     []string
	allocatable v1.ResourceList // the node's, the default for unset limits
}

// containerEnv resolves a container's environment in the order the API defines: envFrom
// sources first, then env entries, each value expanded with the variables defined before it.
func containerEnv(ctx context.Context, in envInputs, pod *v1.Pod, c *v1.Container) ([]v1.EnvVar, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			optional := from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional
			cm, err := in.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && optional {
					continue
				}
				return nil, fmt.Errorf("configmap %q: %w", from.ConfigMapRef.Name, err)
			}
			for k, v := range sortedMap(cm.Data) {
				set(from.Prefix+k, v)
			}
		case from.SecretRef != nil:
			optional := from.SecretRef.Optional != nil && *from.SecretRef.Optional
			s, err := in.client.CoreV1().Secrets(pod.Namespace).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && optional {
					continue
				}
				return nil, fmt.Errorf("secret %q: %w", from.SecretRef.Name, err)
			}
			keys := make([]string, 0, len(s.Data))
			for k := range s.Data {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				set(from.Prefix+k, string(s.Data[k]))
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, fieldpath.Expand(e.Value, vars))
			continue
		}
		v, ok, err := envValueFrom(ctx, in, pod, c, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	out := make([]v1.EnvVar, 0, len(order))
	for _, k := range order {
		out = append(out, v1.EnvVar{Name: k, Value: vars[k]})
	}
	return out, nil
}

// sortedMap yields a map's entries in key order (a deterministic environment).
func sortedMap(m map[string]string) func(func(string, string) bool) {
	return func(yield func(string, string) bool) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}

// envValueFrom resolves one valueFrom; ok is false for a missing optional key.
func envValueFrom(ctx context.Context, in envInputs, pod *v1.Pod, c *v1.Container, src *v1.EnvVarSource) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := podField(pod, in, src.FieldRef.FieldPath)
		return v, err == nil, err
	case src.ResourceFieldRef != nil:
		v, err := resourceField(pod, c, in.allocatable, src.ResourceFieldRef)
		return v, err == nil, err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		optional := ref.Optional != nil && *ref.Optional
		cm, err := in.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) && optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %q: %w", ref.Name, err)
		}
		if v, ok := cm.Data[ref.Key]; ok {
			return v, true, nil
		}
		if v, ok := cm.BinaryData[ref.Key]; ok {
			return string(v), true, nil
		}
		if optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		s, err := in.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) && optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %q: %w", ref.Name, err)
		}
		if v, ok := s.Data[ref.Key]; ok {
			return string(v), true, nil
		}
		if optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
	}
	return "", false, fmt.Errorf("unsupported valueFrom")
}

// podField resolves a downward-API field path.
func podField(pod *v1.Pod, in envInputs, path string) (string, error) {
	ips := fieldpath.IPs{HostIP: first(in.hostIPs), HostIPs: in.hostIPs, PodIP: first(in.podIPs), PodIPs: in.podIPs}
	v, err := fieldpath.Pod(pod, ips, path)
	if errors.Is(err, fieldpath.ErrUnsupported) {
		return "", fmt.Errorf("unsupported fieldPath %q", path)
	}
	return v, err
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// resourceField resolves a resourceFieldRef: the container's request or limit (a limit
// defaults to the node's allocatable) divided by the divisor, rounded up.
func resourceField(pod *v1.Pod, c *v1.Container, allocatable v1.ResourceList, ref *v1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		found, ok := fieldpath.Container(pod, ref.ContainerName)
		if !ok {
			return "", fmt.Errorf("container %q not found", ref.ContainerName)
		}
		c = found
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	rn := v1.ResourceName(name)
	var q resource.Quantity
	var have bool
	if kind == "limits" {
		q, have = c.Resources.Limits[rn]
		if !have {
			q = allocatable[rn]
		}
	} else {
		q = c.Resources.Requests[rn]
	}
	switch rn {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
		return fieldpath.Scale(rn, q, ref.Divisor), nil
	}
	if k, ok := strings.CutPrefix(name, "hugepages-"); ok && k != "" {
		return fieldpath.Scale(rn, q, ref.Divisor), nil
	}
	return "", fmt.Errorf("unsupported resource %q", ref.Resource)
}

// expandAll expands every element of a command or args list with the container's environment.
func expandAll(list []string, env []v1.EnvVar) []string {
	if list == nil {
		return nil
	}
	vars := make(map[string]string, len(env))
	for _, e := range env {
		vars[e.Name] = e.Value
	}
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = fieldpath.Expand(s, vars)
	}
	return out
}
