package printers

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAppsWorkloadRows(t *testing.T) {
	created := metav1.NewTime(now.Add(-2 * time.Hour))
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", CreationTimestamp: created},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"disk": "ssd"},
				Containers:   []corev1.Container{{Name: "a", Image: "agent:1"}},
			}},
		},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 1, NumberAvailable: 2},
	}
	ss := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: created},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr[int32](3), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1"}},
		}}},
		Status: appsv1.StatefulSetStatus{ReadyReplicas: 1},
	}
	rev := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-5d8f", CreationTimestamp: created, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "u", Controller: ptr(true),
		}}},
		Revision: 2,
	}
	for _, tc := range []struct {
		gr   schema.GroupResource
		obj  runtime.Object
		want []interface{}
	}{
		{schema.GroupResource{Group: "apps", Resource: "daemonsets"}, ds,
			[]interface{}{"agent", int64(3), int64(3), int64(2), int64(1), int64(2), "disk=ssd", "120m", "a", "agent:1", "app=agent"}},
		{schema.GroupResource{Group: "apps", Resource: "statefulsets"}, ss,
			[]interface{}{"web", "1/3", "120m", "nginx", "nginx:1"}},
		{schema.GroupResource{Group: "apps", Resource: "controllerrevisions"}, rev,
			[]interface{}{"agent-5d8f", "daemonset.apps/agent", int64(2), "120m"}},
	} {
		p := mustFor(t, tc.gr)
		got := cells(t, p, tc.obj)
		if len(got) != len(tc.want) {
			t.Fatalf("%s: cells %v, want %v", tc.gr, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: cell %d = %#v, want %#v", tc.gr, i, got[i], tc.want[i])
			}
		}
	}
}
