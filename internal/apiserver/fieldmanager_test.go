package apiserver

import (
	"bytes"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"

	"github.com/kubette/kubette/internal/registry"
)

// TestTypeConverterSameManagedFields checks that the wrapped type converter (schemas
// resolved once, no validation walk on the update path) records exactly the
// managedFields the scheme's converter records, over creates and updates of the main
// resource and of the status.
func TestTypeConverterSameManagedFields(t *testing.T) {
	scheme, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	plain := applyconfigurations.NewTypeConverter(scheme)
	fast := newTypeConverter(plain, scheme)
	now := metav1.NewTime(time.Unix(1700000000, 0))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"a": "b"},
			Annotations: map[string]string{"x": "y"}, OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u1"}}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "i", Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
				Env:           []corev1.EnvVar{{Name: "E", Value: "v"}, {Name: "F", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				Resources:     corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}},
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}}}},
			Volumes:     []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
		},
	}
	podStatus := func(p *corev1.Pod) {
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}},
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}
	}
	replicas := int32(3)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns"}, Spec: appsv1.DeploymentSpec{Replicas: &replicas,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}, Spec: pod.Spec}}}
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}, EventTime: metav1.NewMicroTime(now.Time), Reason: "Scheduled", Note: "n",
		Regarding: corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "ns"}, Action: "Binding", ReportingController: "s", ReportingInstance: "s-1", Type: "Normal"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Data: map[string]string{"k": "v"}}

	cases := []struct {
		name   string
		obj    runtime.Object
		gvk    schema.GroupVersionKind
		sub    string
		mutate func(runtime.Object)
	}{
		{"pod spec", pod, corev1.SchemeGroupVersion.WithKind("Pod"), "", func(o runtime.Object) {
			p := o.(*corev1.Pod)
			p.Spec.NodeName = "n"
			p.Labels["c"] = "d"
			p.Spec.Containers[0].Image = "j"
		}},
		{"pod status", pod, corev1.SchemeGroupVersion.WithKind("Pod"), "status", func(o runtime.Object) { podStatus(o.(*corev1.Pod)) }},
		{"deployment", dep, appsv1.SchemeGroupVersion.WithKind("Deployment"), "", func(o runtime.Object) {
			r := int32(5)
			o.(*appsv1.Deployment).Spec.Replicas = &r
		}},
		{"event", ev, eventsv1.SchemeGroupVersion.WithKind("Event"), "", func(o runtime.Object) { o.(*eventsv1.Event).Note = "m" }},
		{"configmap", cm, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "", func(o runtime.Object) { o.(*corev1.ConfigMap).Data["l"] = "w" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := func(tcv managedfields.TypeConverter) []metav1.ManagedFieldsEntry {
				fm, err := managedfields.NewDefaultFieldManager(tcv, scheme, defaulter{}, scheme, tc.gvk, tc.gvk.GroupVersion(), tc.sub, nil)
				if err != nil {
					t.Fatal(err)
				}
				empty, _ := scheme.New(tc.gvk)
				empty.GetObjectKind().SetGroupVersionKind(tc.gvk)
				created := tc.obj.DeepCopyObject()
				created.GetObjectKind().SetGroupVersionKind(tc.gvk)
				created = fm.UpdateNoErrors(empty, created, "creator")
				changed := created.DeepCopyObject()
				tc.mutate(changed)
				changed = fm.UpdateNoErrors(created, changed, "writer")
				m, _ := meta.Accessor(changed)
				return m.GetManagedFields()
			}
			want, got := run(plain), run(fast)
			if len(want) == 0 || len(got) != len(want) {
				t.Fatalf("managedFields: got %d entries, want %d", len(got), len(want))
			}
			for i := range want {
				w, g := want[i], got[i]
				if w.Manager != g.Manager || w.Operation != g.Operation || w.APIVersion != g.APIVersion || w.Subresource != g.Subresource ||
					w.FieldsV1 == nil || g.FieldsV1 == nil || !bytes.Equal(w.FieldsV1.Raw, g.FieldsV1.Raw) {
					t.Fatalf("entry %d:\n got %s %s %s %q %s\nwant %s %s %s %q %s", i, g.Manager, g.Operation, g.APIVersion, g.Subresource, g.FieldsV1.Raw,
						w.Manager, w.Operation, w.APIVersion, w.Subresource, w.FieldsV1.Raw)
				}
			}
		})
	}
}

// BenchmarkFieldManagerPodStatus measures one managed-fields update of a pod's status
// (the sim's and the kubelet's write) with the scheme's converter and the wrapped one.
func BenchmarkFieldManagerPodStatus(b *testing.B) {
	scheme, err := registry.NewScheme()
	if err != nil {
		b.Fatal(err)
	}
	plain := applyconfigurations.NewTypeConverter(scheme)
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	live := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c", Image: "i",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}}}}
	live.SetGroupVersionKind(gvk)
	for _, bc := range []struct {
		name string
		tc   managedfields.TypeConverter
	}{{"scheme", plain}, {"wrapped", newTypeConverter(plain, scheme)}} {
		b.Run(bc.name, func(b *testing.B) {
			fm, err := managedfields.NewDefaultFieldManager(bc.tc, scheme, defaulter{}, scheme, gvk, gvk.GroupVersion(), "status", nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				p := live.DeepCopy()
				p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
					Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
				fm.UpdateNoErrors(live, p, "sim")
			}
		})
	}
}
