package limitranger

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

type ranges []*corev1.LimitRange

func (r ranges) List(_ context.Context, _ schema.GroupResource, ns string) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, lr := range r {
		if lr.Namespace == ns {
			out = append(out, lr.DeepCopy())
		}
	}
	return out, nil
}

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func attrs(obj runtime.Object, kind string, op admission.Operation) *admission.Attributes {
	m, _ := obj.(metav1.Object)
	return &admission.Attributes{Kind: corev1.SchemeGroupVersion.WithKind(kind), Resource: corev1.SchemeGroupVersion.WithResource(strings.ToLower(kind) + "s"),
		Operation: op, Object: obj, Namespace: "ns", Name: m.GetName()}
}

func pod(containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: containers}}
}

func TestDefaults(t *testing.T) {
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer, Default: rl("cpu", "500m", "memory", "500Mi"), DefaultRequest: rl("cpu", "100m", "memory", "200Mi"),
	}}}}
	p := pod(corev1.Container{Name: "a"}, corev1.Container{Name: "b", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "300m")}})
	p.Spec.InitContainers = []corev1.Container{{Name: "i"}}
	pl := New(ranges{lr})
	if err := pl.Admit(context.Background(), attrs(p, "Pod", admission.Create)); err != nil {
		t.Fatal(err)
	}
	a := p.Spec.Containers[0].Resources
	if a.Requests.Cpu().String() != "100m" || a.Limits.Memory().String() != "500Mi" {
		t.Fatalf("container a: %+v", a)
	}
	b := p.Spec.Containers[1].Resources
	if b.Requests.Cpu().String() != "300m" || b.Requests.Memory().String() != "200Mi" || b.Limits.Cpu().String() != "500m" {
		t.Fatalf("container b: %+v", b)
	}
	if p.Spec.InitContainers[0].Resources.Requests.Cpu().String() != "100m" {
		t.Fatalf("init container: %+v", p.Spec.InitContainers[0].Resources)
	}
	want := "LimitRanger plugin set: cpu, memory request for container a; cpu, memory limit for container a; memory request for container b; cpu, memory limit for container b; cpu, memory request for init container i; cpu, memory limit for init container i"
	if got := p.Annotations[Annotation]; got != want {
		t.Fatalf("annotation %q\nwant %q", got, want)
	}
	if err := pl.Validate(context.Background(), attrs(p, "Pod", admission.Create)); err != nil {
		t.Fatal(err)
	}
	// Another namespace's ranges do not apply; neither do pod updates.
	other := pod(corev1.Container{Name: "a"})
	other.Namespace = "other"
	oa := attrs(other, "Pod", admission.Create)
	oa.Namespace = "other"
	if err := pl.Admit(context.Background(), oa); err != nil || len(other.Spec.Containers[0].Resources.Requests) != 0 {
		t.Fatalf("other namespace: %v %+v", err, other.Spec.Containers[0].Resources)
	}
	upd := pod(corev1.Container{Name: "a"})
	if err := pl.Admit(context.Background(), attrs(upd, "Pod", admission.Update)); err != nil || len(upd.Spec.Containers[0].Resources.Requests) != 0 {
		t.Fatalf("update: %v %+v", err, upd.Spec.Containers[0].Resources)
	}
}

func TestBounds(t *testing.T) {
	lr := func(items ...corev1.LimitRangeItem) *corev1.LimitRange {
		return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns"}, Spec: corev1.LimitRangeSpec{Limits: items}}
	}
	res := func(req, lim corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	cases := []struct {
		name string
		lr   *corev1.LimitRange
		c    []corev1.Container
		want string
	}{
		{"within", lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "100m"), Max: rl("cpu", "1")}),
			[]corev1.Container{res(rl("cpu", "200m"), rl("cpu", "1"))}, ""},
		{"below min", lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "100m")}),
			[]corev1.Container{res(rl("cpu", "50m"), nil)}, "minimum cpu usage per Container is 100m, but request is 50m"},
		{"no request", lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("memory", "1Mi")}),
			[]corev1.Container{res(nil, nil)}, "minimum memory usage per Container is 1Mi.  No request is specified"},
		{"over max", lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: rl("memory", "1Gi")}),
			[]corev1.Container{res(nil, rl("memory", "2Gi"))}, "maximum memory usage per Container is 1Gi, but limit is 2Gi"},
		{"no limit", lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: rl("memory", "1Gi")}),
			[]corev1.Container{res(nil, nil)}, "maximum memory usage per Container is 1Gi.  No limit is specified"},
		{"ratio", lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: rl("cpu", "2")}),
			[]corev1.Container{res(rl("cpu", "100m"), rl("cpu", "500m"))}, "cpu max limit to request ratio per Container is 2, but provided ratio is 5.000000"},
		{"pod sum", lr(corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("cpu", "1")}),
			[]corev1.Container{res(nil, rl("cpu", "600m")), res(nil, rl("cpu", "600m"))}, "maximum cpu usage per Pod is 1, but limit is 1200m"},
		{"two errors", lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "1"), Max: rl("memory", "1Gi")}),
			[]corev1.Container{res(rl("cpu", "500m"), nil)}, "[minimum cpu usage per Container is 1, but request is 500m, maximum memory usage per Container is 1Gi.  No limit is specified]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := New(ranges{tc.lr}).Validate(context.Background(), attrs(pod(tc.c...), "Pod", admission.Create))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !apierrors.IsForbidden(err) || err.Error() != `pods "p" is forbidden: `+tc.want {
				t.Fatalf("error %v\nwant %q", err, tc.want)
			}
		})
	}
}

func TestClaim(t *testing.T) {
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypePersistentVolumeClaim, Min: rl("storage", "1Gi"), Max: rl("storage", "10Gi"),
	}}}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "20Gi")}}}
	err := New(ranges{lr}).Validate(context.Background(), attrs(pvc, "PersistentVolumeClaim", admission.Create))
	want := `persistentvolumeclaims "c" is forbidden: maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}
