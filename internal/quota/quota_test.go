package quota

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestPodUsage(t *testing.T) {
	now := time.Now()
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "1Gi"), Limits: rl("cpu", "200m")}},
		{Name: "b", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "50m", "example.com/gpu", "1"), Limits: rl("example.com/gpu", "1")}},
	}}}
	u, err := Pods{}.Usage(p, now)
	if err != nil {
		t.Fatal(err)
	}
	want := rl("count/pods", "1", "pods", "1", "cpu", "150m", "requests.cpu", "150m", "limits.cpu", "200m",
		"memory", "1Gi", "requests.memory", "1Gi", "requests.example.com/gpu", "1")
	if !Equal(u, want) {
		t.Fatalf("usage %v\nwant %v", String(u), String(want))
	}
	p.Status.Phase = corev1.PodSucceeded
	if u, _ := (Pods{}).Usage(p, now); !Equal(u, rl("count/pods", "1")) {
		t.Fatalf("finished pod: %v", String(u))
	}
	p.Status.Phase = corev1.PodRunning
	past := metav1.NewTime(now.Add(-time.Minute))
	grace := int64(30)
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &past, &grace
	if Charged(p, now) {
		t.Fatal("a pod past its grace period is charged")
	}
}

func TestPodScopes(t *testing.T) {
	best := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	deadline := int64(10)
	burst := &corev1.Pod{Spec: corev1.PodSpec{ActiveDeadlineSeconds: &deadline, PriorityClassName: "high",
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("memory", "1Mi")}}}}}
	sel := func(scope corev1.ResourceQuotaScope, op corev1.ScopeSelectorOperator, values ...string) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: scope, Operator: op, Values: values}
	}
	cases := []struct {
		sel        corev1.ScopedResourceSelectorRequirement
		best, burs bool
	}{
		{sel(corev1.ResourceQuotaScopeBestEffort, corev1.ScopeSelectorOpExists), true, false},
		{sel(corev1.ResourceQuotaScopeNotBestEffort, corev1.ScopeSelectorOpExists), false, true},
		{sel(corev1.ResourceQuotaScopeTerminating, corev1.ScopeSelectorOpExists), false, true},
		{sel(corev1.ResourceQuotaScopeNotTerminating, corev1.ScopeSelectorOpExists), true, false},
		{sel(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "high", "low"), false, true},
		{sel(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpNotIn, "high"), true, false},
		{sel(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpDoesNotExist), true, false},
	}
	for _, tc := range cases {
		for _, c := range []struct {
			pod  *corev1.Pod
			want bool
		}{{best, tc.best}, {burst, tc.burs}} {
			got, err := Pods{}.MatchesScope(tc.sel, c.pod)
			if err != nil || got != c.want {
				t.Errorf("%v on %s: %v %v, want %v", tc.sel, c.pod.Spec.PriorityClassName, got, err, c.want)
			}
		}
	}
}

func TestServiceUsage(t *testing.T) {
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}, {Port: 443}}}}
	u, _ := Services{}.Usage(svc, time.Now())
	if want := rl("count/services", "1", "services", "1", "services.loadbalancers", "1", "services.nodeports", "2"); !Equal(u, want) {
		t.Fatalf("usage %v", String(u))
	}
}

func TestNamesAndResources(t *testing.T) {
	gr, ok := ParseObjectCountName("count/deployments.apps")
	if !ok || gr != (schema.GroupResource{Group: "apps", Resource: "deployments"}) || ObjectCountName(gr) != "count/deployments.apps" {
		t.Fatalf("parse: %v %v", gr, ok)
	}
	got := Resources([]corev1.ResourceName{"requests.cpu", "services.nodeports", "secrets", "count/replicasets.apps", "count/pods"})
	want := []string{"pods", "replicasets.apps", "secrets", "services"}
	if len(got) != len(want) {
		t.Fatalf("resources %v, want %v", got, want)
	}
	for i := range got {
		if got[i].String() != want[i] {
			t.Fatalf("resources %v, want %v", got, want)
		}
	}
	if u, _ := For(schema.GroupResource{Resource: "secrets"}).Usage(nil, time.Now()); !Equal(u, rl("count/secrets", "1", "secrets", "1")) {
		t.Fatalf("secret usage %v", String(u))
	}
}

func TestConstraints(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}, {Name: "b"},
	}, InitContainers: []corev1.Container{{Name: "i"}}}}
	err := Pods{}.Constraints([]corev1.ResourceName{"requests.cpu", "limits.memory", "pods"}, p)
	if want := "must specify limits.memory for: a,b,i; requests.cpu for: b,i"; err == nil || err.Error() != want {
		t.Fatalf("%v, want %q", err, want)
	}
}
