package sim

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestParseTaint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want corev1.Taint
		err  bool
	}{
		{in: "dedicated=sim:NoSchedule", want: corev1.Taint{Key: "dedicated", Value: "sim", Effect: corev1.TaintEffectNoSchedule}},
		{in: "example.com/gpu:NoExecute", want: corev1.Taint{Key: "example.com/gpu", Effect: corev1.TaintEffectNoExecute}},
		{in: "a=b=c:NoSchedule", err: true},
		{in: "a=b", err: true},
		{in: "a=b:Sometimes", err: true},
		{in: "=b:NoSchedule", err: true},
	} {
		got, err := ParseTaint(tc.in)
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("ParseTaint(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestOptionsDefaultsAndValidation(t *testing.T) {
	c, err := Options{Nodes: 3, Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}.complete()
	if err != nil {
		t.Fatal(err)
	}
	if c.Capacity.Cpu().String() != "4" || c.Capacity.Memory().String() != "256Gi" || c.Capacity.Pods().String() != "110" {
		t.Errorf("capacity %v: want cpu 4 and the other defaults", c.Capacity)
	}
	if c.LeaseRenewInterval != 10e9 || c.NamePrefix != "sim-node-" || c.Workers != 32 || c.MaxDeletionGrace != 1e9 {
		t.Errorf("defaults: %+v", c.Options)
	}
	for name, o := range map[string]Options{
		"no nodes":          {},
		"bad prefix":        {Nodes: 1, NamePrefix: "Sim_"},
		"too many nodes":    {Nodes: 300, PodCIDRBase: "10.0.0.0/16"},
		"bad label":         {Nodes: 1, Labels: map[string]string{"a b": "c"}},
		"bad taint effect":  {Nodes: 1, Taints: []corev1.Taint{{Key: "a", Effect: "Never"}}},
		"IPv6 pod CIDR":     {Nodes: 1, PodCIDRBase: "fd00::/48"},
		"tiny node CIDR":    {Nodes: 1, NodeCIDRMaskSize: 30},
		"short lease":       {Nodes: 1, LeaseDuration: 10e6},
		"negative capacity": {Nodes: 1, Capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("-1")}},
	} {
		if _, err := o.complete(); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}
