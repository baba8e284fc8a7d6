package registry

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func lookup(t *testing.T, table *Table, gv, plural string) *Resource {
	t.Helper()
	for _, r := range table.All() {
		if r.GroupVersion.String() == gv && r.Plural == plural {
			return r
		}
	}
	t.Fatalf("no resource %s %s", gv, plural)
	return nil
}

// TestEveryBuiltinHasTypedStrategy checks that every built-in kind defaults and validates
// through its strategy: an invalid name is refused on create by every stored kind.
func TestEveryBuiltinHasTypedStrategy(t *testing.T) {
	for _, r := range Builtin() {
		if r.Strategy.Default == nil || r.Strategy.Validate == nil || r.Strategy.ValidateUpdate == nil || r.Strategy.ValidateStatusUpdate == nil {
			t.Errorf("%s: strategy without defaults or validation", r.GroupResource())
		}
		if r.Virtual || (r.GroupVersion.Group == "" && r.Kind == "Event") {
			continue // core/v1 Events keep upstream's lenient legacy validation
		}
		obj := r.New()
		m, _ := metaOf(obj)
		m.SetName("Not_A/Name") // invalid everywhere: RBAC names need only be path segments
		if r.Namespaced {
			m.SetNamespace("default")
		}
		r.PrepareForCreate(obj)
		r.Default(obj)
		if errs := r.Validate(obj); len(errs) == 0 {
			t.Errorf("%s: name %q accepted", r.GroupResource(), m.GetName())
		}
	}
}

// TestPodStrategy covers the pod's create preparation, grace periods and the
// ephemeralcontainers subresource.
func TestPodStrategy(t *testing.T) {
	pods := lookup(t, NewTable(Builtin()), "v1", "pods")
	cpu := resource.MustParse("1")
	pod := &corev1.Pod{
		Spec: corev1.PodSpec{
			Containers:      []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: cpu}}}},
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "g"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
	}
	pods.PrepareForCreate(pod)
	if pod.Status.Phase != corev1.PodPending || pod.Status.PodIP != "" || pod.Status.QOSClass != corev1.PodQOSGuaranteed {
		t.Errorf("prepared status %+v", pod.Status)
	}
	if len(pod.Status.Conditions) != 1 || pod.Status.Conditions[0].Reason != corev1.PodReasonSchedulingGated {
		t.Errorf("gated pod conditions %+v", pod.Status.Conditions)
	}

	if !pods.Graceful() {
		t.Error("pods are not graceful")
	}
	thirty, five := int64(30), int64(5)
	for _, tc := range []struct {
		name  string
		pod   corev1.Pod
		opts  *metav1.DeleteOptions
		grace int64
	}{
		{"unscheduled", corev1.Pod{}, nil, 0},
		{"default", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}}, nil, 30},
		{"pod's own", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n", TerminationGracePeriodSeconds: &five}}, nil, 5},
		{"request's", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n", TerminationGracePeriodSeconds: &thirty}}, &metav1.DeleteOptions{GracePeriodSeconds: &five}, 5},
		{"finished", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, nil, 0},
	} {
		if got := pods.GracePeriod(&tc.pod, tc.opts); got != tc.grace {
			t.Errorf("%s: grace %d, want %d", tc.name, got, tc.grace)
		}
	}

	cur := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	req := cur.DeepCopy()
	req.Labels = map[string]string{"changed": "yes"}
	req.Spec.Containers[0].Image = "other"
	req.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
	out := pods.UpdateThrough(SubEphemeralContainers, req, cur).(*corev1.Pod)
	if len(out.Spec.EphemeralContainers) != 1 || out.Spec.Containers[0].Image != "i" || out.Labels["a"] != "b" {
		t.Errorf("ephemeralcontainers update wrote %+v", out)
	}
	if !pods.SubresourceServes(SubEphemeralContainers, "patch") || pods.SubresourceServes(SubEphemeralContainers, "delete") {
		t.Error("ephemeralcontainers verbs")
	}
}

// TestNamespaceStrategy covers the system namespaces, Terminating and finalize.
func TestNamespaceStrategy(t *testing.T) {
	ns := lookup(t, NewTable(Builtin()), "v1", "namespaces")
	if err := ns.CheckDelete(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}); !apierrors.IsForbidden(err) {
		t.Errorf("deleting kube-system: %v", err)
	}
	if err := ns.CheckDelete(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}); err != nil {
		t.Errorf("deleting team: %v", err)
	}
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	ns.PrepareForCreate(n)
	if n.Status.Phase != corev1.NamespaceActive {
		t.Error("a namespace's status is cleared on create")
	}
	if !ns.PrepareForDelete(n) || n.Status.Phase != corev1.NamespaceTerminating || !ns.Finalizing(n) {
		t.Errorf("delete of a namespace with finalizers: %+v", n.Status)
	}
	req := n.DeepCopy()
	req.Spec.Finalizers = nil
	req.Labels = map[string]string{"x": "y"}
	out := ns.UpdateThrough("finalize", req, n).(*corev1.Namespace)
	if len(out.Spec.Finalizers) != 0 || out.Labels != nil || ns.Finalizing(out) {
		t.Errorf("finalize wrote %+v", out)
	}
	if ns.SubresourceServes("finalize", "patch") || !ns.SubresourceServes("finalize", "update") {
		t.Error("finalize verbs")
	}
}

// TestStatusRules checks what the main resource and /status each keep.
func TestStatusRules(t *testing.T) {
	deploys := lookup(t, NewTable(Builtin()), "apps/v1", "deployments")
	one, two := int32(1), int32(2)
	cur := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}, Spec: appsv1.DeploymentSpec{Replicas: &one}, Status: appsv1.DeploymentStatus{Replicas: 1}}
	req := cur.DeepCopy()
	req.Spec.Replicas, req.Status.Replicas, req.Labels = &two, 7, nil
	main := deploys.UpdateThrough("", req.DeepCopy(), cur).(*appsv1.Deployment)
	if *main.Spec.Replicas != 2 || main.Status.Replicas != 1 {
		t.Errorf("main resource update wrote spec %d status %d", *main.Spec.Replicas, main.Status.Replicas)
	}
	status := deploys.UpdateThrough("status", req.DeepCopy(), cur).(*appsv1.Deployment)
	if *status.Spec.Replicas != 1 || status.Status.Replicas != 7 || status.Labels["a"] != "b" {
		t.Errorf("status update wrote spec %d status %d labels %v", *status.Spec.Replicas, status.Status.Replicas, status.Labels)
	}
}

// TestScaleStrategies checks the scale mapping of the kinds that have one.
func TestScaleStrategies(t *testing.T) {
	table := NewTable(Builtin())
	three := int32(3)
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	for _, tc := range []struct {
		res *Resource
		obj runtime.Object
	}{
		{lookup(t, table, "apps/v1", "deployments"), &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &three, Selector: sel}, Status: appsv1.DeploymentStatus{Replicas: 2}}},
		{lookup(t, table, "apps/v1", "replicasets"), &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: &three, Selector: sel}, Status: appsv1.ReplicaSetStatus{Replicas: 2}}},
		{lookup(t, table, "v1", "replicationcontrollers"), &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Replicas: &three, Selector: sel.MatchLabels}, Status: corev1.ReplicationControllerStatus{Replicas: 2}}},
	} {
		if !tc.res.HasSubresource("scale") || tc.res.Strategy.Scale == nil {
			t.Fatalf("%s: no scale", tc.res.GroupResource())
		}
		spec, status, selector, err := tc.res.Strategy.Scale.Replicas(tc.obj)
		if err != nil || spec != 3 || status != 2 || selector != "app=web" {
			t.Errorf("%s: scale %d %d %q %v", tc.res.GroupResource(), spec, status, selector, err)
		}
		tc.res.Strategy.Scale.SetReplicas(tc.obj, 5)
		if spec, _, _, _ := tc.res.Strategy.Scale.Replicas(tc.obj); spec != 5 {
			t.Errorf("%s: set replicas gave %d", tc.res.GroupResource(), spec)
		}
	}
	for _, r := range table.All() {
		if r.HasSubresource("scale") != (r.Strategy.Scale != nil) {
			t.Errorf("%s: scale subresource and scale strategy disagree", r.GroupResource())
		}
	}
}

type recordingAllocator struct{ allocated, released int }

func (a *recordingAllocator) Allocate(context.Context, runtime.Object, runtime.Object, bool) (func(bool), error) {
	a.allocated++
	return func(bool) {}, nil
}
func (a *recordingAllocator) Release(runtime.Object) { a.released++ }

// TestAllocatorHook checks that only a kind with an allocator allocates.
func TestAllocatorHook(t *testing.T) {
	table := NewTable(Builtin())
	svcs, cms := lookup(t, table, "v1", "services"), lookup(t, table, "v1", "configmaps")
	a := &recordingAllocator{}
	svcs.Strategy.Allocator = a
	for _, r := range []*Resource{svcs, cms} {
		finish, err := r.Allocate(context.Background(), r.New(), nil, false)
		if err != nil || finish == nil {
			t.Fatalf("%s: allocate %v", r.GroupResource(), err)
		}
		finish(true)
		r.Release(r.New())
	}
	if a.allocated != 1 || a.released != 1 {
		t.Errorf("allocator called %d/%d times, want 1/1", a.allocated, a.released)
	}
	cur := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.5", ClusterIPs: []string{"10.96.0.5"}, Type: corev1.ServiceTypeNodePort,
		Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080}}}}
	req := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	out := svcs.UpdateThrough("", req, cur).(*corev1.Service)
	if out.Spec.ClusterIP != "10.96.0.5" || out.Spec.Ports[0].NodePort != 30080 {
		t.Errorf("service update dropped its allocations: %+v", out.Spec)
	}
}

// TestDeletePropagation: the options decide; without any, ReplicationControllers
// orphan and every other kind deletes in the background, as upstream.
func TestDeletePropagation(t *testing.T) {
	table := NewTable(Builtin())
	rcs, rss := lookup(t, table, "v1", "replicationcontrollers"), lookup(t, table, "apps/v1", "replicasets")
	yes, no := true, false
	fg := metav1.DeletePropagationForeground
	for _, tc := range []struct {
		r    *Resource
		opts *metav1.DeleteOptions
		want metav1.DeletionPropagation
	}{
		{rcs, &metav1.DeleteOptions{}, metav1.DeletePropagationOrphan},
		{rcs, nil, metav1.DeletePropagationOrphan},
		{rcs, &metav1.DeleteOptions{OrphanDependents: &no}, metav1.DeletePropagationBackground},
		{rcs, &metav1.DeleteOptions{PropagationPolicy: &fg}, metav1.DeletePropagationForeground},
		{rss, &metav1.DeleteOptions{}, metav1.DeletePropagationBackground},
		{rss, &metav1.DeleteOptions{OrphanDependents: &yes}, metav1.DeletePropagationOrphan},
	} {
		if got := tc.r.DeletePropagation(tc.opts); got != tc.want {
			t.Errorf("%s %+v: %s, want %s", tc.r.GroupResource(), tc.opts, got, tc.want)
		}
	}
}
