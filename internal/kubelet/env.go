package kubelet

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
			set(e.Name, expand(e.Value, vars))
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
	if k, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return first(in.hostIPs), nil
	case "status.hostIPs":
		return strings.Join(in.hostIPs, ","), nil
	case "status.podIP":
		return first(in.podIPs), nil
	case "status.podIPs":
		return strings.Join(in.podIPs, ","), nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// subscript parses `prefix['key']`.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// formatMap renders labels or annotations as the downward API does: key="value" lines, sorted.
func formatMap(m map[string]string) string {
	var lines []string
	for k, v := range sortedMap(m) {
		lines = append(lines, fmt.Sprintf("%s=%q", k, v))
	}
	return strings.Join(lines, "\n")
}

// resourceField resolves a resourceFieldRef: the container's request or limit (a limit
// defaults to the node's allocatable) divided by the divisor, rounded up.
func resourceField(pod *v1.Pod, c *v1.Container, allocatable v1.ResourceList, ref *v1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		found := false
		for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range cs {
				if cs[i].Name == ref.ContainerName {
					c, found = &cs[i], true
				}
			}
		}
		if !found {
			return "", fmt.Errorf("container %q not found", ref.ContainerName)
		}
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
			q, have = allocatable[rn]
		}
	} else {
		q, have = c.Resources.Requests[rn]
		if !have && rn == v1.ResourceCPU {
			q = resource.MustParse("0")
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	switch rn {
	case v1.ResourceCPU:
		v := math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue()))
		return strconv.FormatInt(int64(v), 10), nil
	case v1.ResourceMemory, v1.ResourceEphemeralStorage:
		return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
	}
	if k, ok := strings.CutPrefix(name, "hugepages-"); ok && k != "" {
		return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
	}
	return "", fmt.Errorf("unsupported resource %q", ref.Resource)
}

// expand replaces $(VAR) references in s with values from vars, as the API defines: $$ is an
// escaped $, and a reference to an undefined variable (or an unclosed one) stays as written.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok && name != "" {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
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
		out[i] = expand(s, vars)
	}
	return out
}
