package statefulset

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNewPod(t *testing.T) {
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "u"},
		Spec: appsv1.StatefulSetSpec{
			ServiceName:          "db-headless",
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: corev1.PodSpec{Volumes: []corev1.Volume{
					{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					{Name: "conf"},
				}},
			},
		},
	}
	p := newPod(set, &set.Spec.Template, "db-abc", 2)
	if p.Name != "db-2" || p.Spec.Hostname != "db-2" || p.Spec.Subdomain != "db-headless" {
		t.Errorf("identity %s %s %s", p.Name, p.Spec.Hostname, p.Spec.Subdomain)
	}
	if p.Labels["statefulset.kubernetes.io/pod-name"] != "db-2" || p.Labels["apps.kubernetes.io/pod-index"] != "2" ||
		p.Labels["controller-revision-hash"] != "db-abc" || p.Labels["app"] != "db" {
		t.Errorf("labels %v", p.Labels)
	}
	if len(p.Spec.Volumes) != 2 || p.Spec.Volumes[0].PersistentVolumeClaim == nil || p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "data-db-2" {
		t.Errorf("volumes %+v", p.Spec.Volumes)
	}
	if set.Spec.Template.Spec.Volumes[0].EmptyDir == nil || set.Spec.Template.Labels["controller-revision-hash"] != "" {
		t.Errorf("the set's template changed")
	}
	if !identityMatches(set, p) || parentOf(p) != "db" {
		t.Errorf("identity does not match")
	}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-x"}}
	if isMember(set, other) || ordinalOf(other) != -1 {
		t.Errorf("db-x is a member")
	}
}

func parentOf(p *corev1.Pod) string {
	parent, _ := parentAndOrdinal(p)
	return parent
}
