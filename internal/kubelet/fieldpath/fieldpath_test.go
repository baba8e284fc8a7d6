package fieldpath

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPod(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1",
			Labels: map[string]string{"b": "2", "a": "1"}, Annotations: map[string]string{"x": `q"`}},
		Spec: v1.PodSpec{NodeName: "n1", ServiceAccountName: "sa"},
	}
	ips := IPs{HostIP: "10.0.0.1", HostIPs: []string{"10.0.0.1", "fd00::1"}, PodIP: "10.1.0.2", PodIPs: []string{"10.1.0.2", "fd01::2"}}
	for path, want := range map[string]string{
		"metadata.name":             "web",
		"metadata.namespace":        "ns",
		"metadata.uid":              "u1",
		"metadata.labels":           "a=\"1\"\nb=\"2\"",
		"metadata.labels['b']":      "2",
		"metadata.labels['none']":   "",
		"metadata.annotations":      `x="q\""`,
		"metadata.annotations['x']": `q"`,
		"spec.nodeName":             "n1",
		"spec.serviceAccountName":   "sa",
		"status.hostIP":             "10.0.0.1",
		"status.hostIPs":            "10.0.0.1,fd00::1",
		"status.podIP":              "10.1.0.2",
		"status.podIPs":             "10.1.0.2,fd01::2",
	} {
		got, err := Pod(pod, ips, path)
		if err != nil || got != want {
			t.Errorf("Pod(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := Pod(pod, ips, "spec.hostname"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Pod(spec.hostname) error %v, want ErrUnsupported", err)
	}
}

func TestSubscript(t *testing.T) {
	for _, tc := range []struct {
		path, key string
		ok        bool
	}{
		{"metadata.labels['a']", "a", true},
		{"metadata.labels['a.b/c']", "a.b/c", true},
		{"metadata.labels", "", false},
		{"metadata.labels['a'", "", false},
		{"metadata.annotations['a']", "", false},
	} {
		if k, ok := Subscript(tc.path, "metadata.labels"); ok != tc.ok || (ok && k != tc.key) {
			t.Errorf("Subscript(%q) = %q, %v; want %q, %v", tc.path, k, ok, tc.key, tc.ok)
		}
	}
}

func TestFormatMapEmpty(t *testing.T) {
	if got := FormatMap(nil); got != "" {
		t.Errorf("FormatMap(nil) = %q", got)
	}
}

func TestContainer(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		Containers:     []v1.Container{{Name: "a"}, {Name: "b"}},
		InitContainers: []v1.Container{{Name: "init"}},
	}}
	if c, ok := Container(pod, "b"); !ok || c != &pod.Spec.Containers[1] {
		t.Errorf("Container(b) = %v, %v", c, ok)
	}
	if c, ok := Container(pod, "init"); !ok || c != &pod.Spec.InitContainers[0] {
		t.Errorf("Container(init) = %v, %v", c, ok)
	}
	if c, ok := Container(pod, "none"); ok || c != nil {
		t.Errorf("Container(none) = %v, %v", c, ok)
	}
}

func TestScale(t *testing.T) {
	q := resource.MustParse
	for _, tc := range []struct {
		name       v1.ResourceName
		v, divisor string
		want       string
	}{
		{v1.ResourceCPU, "250m", "0", "1"},
		{v1.ResourceCPU, "250m", "1m", "250"},
		{v1.ResourceCPU, "2", "1", "2"},
		{v1.ResourceMemory, "64Mi", "1Mi", "64"},
		{v1.ResourceMemory, "1500", "1k", "2"},
		{v1.ResourceEphemeralStorage, "1Gi", "0", "1073741824"},
		{"hugepages-2Mi", "4Mi", "2Mi", "2"},
	} {
		if got := Scale(tc.name, q(tc.v), q(tc.divisor)); got != tc.want {
			t.Errorf("Scale(%s, %s, %s) = %s, want %s", tc.name, tc.v, tc.divisor, got, tc.want)
		}
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two"}
	for in, want := range map[string]string{
		"plain":          "plain",
		"$(A)":           "1",
		"x$(A)y$(B)z":    "x1ytwoz",
		"$(A)/$(B)":      "1/two",
		"pre$(A)suf":     "pre1suf",
		"$$(A)":          "$(A)",
		"$$$(A)":         "$1",
		"$(C)":           "$(C)",
		"$(A":            "$(A",
		"$A":             "$A",
		"a$b":            "a$b",
		"end$":           "end$",
		"$()":            "$()",
		"$(A)$(A)$$":     "11$",
		"$(B)-$$-$(B)$$": "two-$-two$",
	} {
		if got := Expand(in, vars); got != want {
			t.Errorf("Expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestContainerResource(t *testing.T) {
	c := &v1.Container{Name: "a", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("32Mi")},
		Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1250m"), v1.ResourceMemory: resource.MustParse("128Mi"),
			v1.ResourceEphemeralStorage: resource.MustParse("0"), "hugepages-2Mi": resource.MustParse("4Mi")},
	}}
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("8Gi"),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"), "hugepages-1Gi": resource.MustParse("2Gi")}
	for _, tc := range []struct {
		res, divisor, want string
		alloc              v1.ResourceList
	}{
		{"limits.cpu", "", "2", alloc}, // 1250m rounded up to whole cores
		{"limits.cpu", "1m", "1250", alloc},
		{"requests.cpu", "", "1", alloc},
		{"requests.cpu", "1m", "250", alloc},
		{"limits.memory", "", "134217728", alloc},
		{"limits.memory", "1Mi", "128", alloc},
		{"requests.memory", "1Mi", "32", alloc},
		{"limits.ephemeral-storage", "1Gi", "100", alloc}, // a zero limit defaults too
		{"requests.ephemeral-storage", "", "0", alloc},
		{"limits.hugepages-2Mi", "1Mi", "4", alloc},
		{"limits.hugepages-1Gi", "", "0", alloc}, // hugepages never default to allocatable
		{"limits.ephemeral-storage", "", "0", nil},
	} {
		var d resource.Quantity
		if tc.divisor != "" {
			d = resource.MustParse(tc.divisor)
		}
		got, err := ContainerResource(c, tc.alloc, tc.res, d)
		if err != nil || got != tc.want {
			t.Errorf("ContainerResource(%s, divisor %q) = %q, %v; want %q", tc.res, tc.divisor, got, err, tc.want)
		}
	}
	noLimits := &v1.Container{Name: "b"}
	for res, want := range map[string]string{"limits.cpu": "2", "limits.memory": "8589934592"} {
		if got, err := ContainerResource(noLimits, alloc, res, resource.Quantity{}); err != nil || got != want {
			t.Errorf("default %s = %q, %v; want %q (the node's allocatable)", res, got, err, want)
		}
	}
	for _, res := range []string{"limits.pods", "requests", "cpu", "status.cpu", "limits.hugepages-"} {
		if _, err := ContainerResource(c, alloc, res, resource.Quantity{}); err == nil || err.Error() != "unsupported container resource : "+res {
			t.Errorf("ContainerResource(%s) error %v, want upstream's unsupported container resource", res, err)
		}
	}
}
