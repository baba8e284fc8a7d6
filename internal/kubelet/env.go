package kubelet

import (
	"context"
	"errors"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/kubette/kubette/internal/kubelet/fieldpath"
)

// envInputs is what a container's environment may refer to besides the pod itself.
type envInputs struct {
	client      kubernetes.Interface
	podIPs      []string
	hostIPs     []string
	allocatable v1.ResourceList           // the node's, the default for unset limits
	services    corelisters.ServiceLister // the Services whose variables pods get; nil: none
}

// containerEnv resolves a container's environment as upstream's kubelet: envFrom sources
// first, then env entries (which override them), each value expanded with the variables
// defined before it and the service variables; then the service variables (serviceEnv) the
// container does not define itself.
func containerEnv(ctx context.Context, in envInputs, pod *v1.Pod, c *v1.Container) ([]v1.EnvVar, error) {
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks // the API defaults it to true
	svcEnv, err := serviceEnv(in.services, pod.Namespace, links)
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	scope := make(map[string]string, len(svcEnv)) // what $(VAR) sees: vars over the service variables
	for _, e := range svcEnv {
		scope[e.Name] = e.Value
	}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k], scope[k] = v, v
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
			set(e.Name, fieldpath.Expand(e.Value, scope))
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
	out := make([]v1.EnvVar, 0, len(order)+len(svcEnv))
	for _, k := range order {
		out = append(out, v1.EnvVar{Name: k, Value: vars[k]})
	}
	for _, e := range svcEnv {
		if _, own := vars[e.Name]; !own {
			out = append(out, e)
		}
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

// resourceField resolves a resourceFieldRef of c (or of the container it names).
func resourceField(pod *v1.Pod, c *v1.Container, allocatable v1.ResourceList, ref *v1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		found, ok := fieldpath.Container(pod, ref.ContainerName)
		if !ok {
			return "", fmt.Errorf("container %q not found", ref.ContainerName)
		}
		c = found
	}
	return fieldpath.ContainerResource(c, allocatable, ref.Resource, ref.Divisor)
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
