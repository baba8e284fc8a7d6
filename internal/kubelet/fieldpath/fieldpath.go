// Package fieldpath resolves the kubelet's downward-API references — field paths of a pod
// (metadata.name, metadata.labels['x'], status.podIP, ...) and resourceFieldRef values of a
// container — and expands $(VAR) references, for both container environments and volumes.
package fieldpath

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ErrUnsupported is returned (wrapped) for a field path that Pod does not know; callers
// report the path in their own words.
var ErrUnsupported = errors.New("unsupported field path")

// IPs are the addresses the status.* field paths resolve to.
type IPs struct {
	HostIP  string   // status.hostIP
	HostIPs []string // status.hostIPs, joined with ","
	PodIP   string   // status.podIP
	PodIPs  []string // status.podIPs, joined with ","
}

// Pod resolves a downward-API field path of pod, the status.* paths from ips. An unknown
// path is an error wrapping ErrUnsupported.
func Pod(pod *v1.Pod, ips IPs, path string) (string, error) {
	if k, ok := Subscript(path, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := Subscript(path, "metadata.annotations"); ok {
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
		return FormatMap(pod.Labels), nil
	case "metadata.annotations":
		return FormatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return ips.HostIP, nil
	case "status.hostIPs":
		return strings.Join(ips.HostIPs, ","), nil
	case "status.podIP":
		return ips.PodIP, nil
	case "status.podIPs":
		return strings.Join(ips.PodIPs, ","), nil
	}
	return "", fmt.Errorf("field path %q: %w", path, ErrUnsupported)
}

// Subscript parses `prefix['key']`, returning key and whether path has that form.
func Subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// FormatMap renders labels or annotations as the downward API does: key="value" lines,
// sorted by key.
func FormatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k + "=" + strconv.Quote(m[k]))
	}
	return b.String()
}

// Container finds the container (or init container) of pod named name; when several have
// that name the last init container wins, as the callers always did.
func Container(pod *v1.Pod, name string) (*v1.Container, bool) {
	var c *v1.Container
	for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				c = &cs[i]
			}
		}
	}
	return c, c != nil
}

// Scale renders a resourceFieldRef value: q divided by divisor (1 when zero) and rounded up,
// in millicores for cpu and in units for every other resource.
func Scale(name v1.ResourceName, q, divisor resource.Quantity) string {
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == v1.ResourceCPU {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10)
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10)
}

// Expand replaces $(VAR) references in s with values from vars, as the API defines: $$ is an
// escaped $, and a reference to an undefined variable (or an unclosed one) stays as written.
func Expand(s string, vars map[string]string) string {
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
