package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func validRuntimeClass() *nodev1.RuntimeClass {
	return &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "sandboxed.example.com"},
		Handler:    "runc",
		Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("1Mi")}},
		Scheduling: &nodev1.Scheduling{
			NodeSelector: map[string]string{"sandbox.example.com/runtime": "runc"},
			Tolerations:  []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
	}
}

func TestValidateRuntimeClass(t *testing.T) {
	with := func(f func(*nodev1.RuntimeClass)) *nodev1.RuntimeClass {
		rc := validRuntimeClass()
		f(rc)
		return rc
	}
	cases := []struct {
		name string
		rc   *nodev1.RuntimeClass
		want []want
	}{
		{"valid", validRuntimeClass(), nil},
		{"minimal", &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Handler: "a"}, nil},
		{"name not a subdomain", with(func(rc *nodev1.RuntimeClass) { rc.Name = "Bad_Name" }), []want{inv("metadata.name")}},
		{"namespace given", with(func(rc *nodev1.RuntimeClass) { rc.Namespace = "default" }), []want{forb("metadata.namespace")}},
		{"handler empty", with(func(rc *nodev1.RuntimeClass) { rc.Handler = "" }), []want{inv("handler")}},
		{"handler with a dot", with(func(rc *nodev1.RuntimeClass) { rc.Handler = "run.c" }), []want{invd("handler", "must not contain dots")}},
		{"handler upper case", with(func(rc *nodev1.RuntimeClass) { rc.Handler = "RunC" }), []want{inv("handler")}},
		{"negative overhead", with(func(rc *nodev1.RuntimeClass) {
			rc.Overhead.PodFixed[corev1.ResourceCPU] = resource.MustParse("-1")
		}), []want{inv("overhead.limits[cpu]")}},
		{"overhead of a bad resource name", with(func(rc *nodev1.RuntimeClass) {
			rc.Overhead.PodFixed["bad name"] = resource.MustParse("1")
		}), []want{inv("overhead.limits[bad name]"), inv("overhead.limits[bad name]")}},
		{"bad node selector", with(func(rc *nodev1.RuntimeClass) {
			rc.Scheduling.NodeSelector = map[string]string{"a/b/c": "x", "ok": "bad value!"}
		}), []want{inv("scheduling.nodeSelector"), inv("scheduling.nodeSelector")}},
		{"toleration errors under tolerations twice, as upstream", with(func(rc *nodev1.RuntimeClass) {
			rc.Scheduling.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpEqual, Value: "x"}}
		}), []want{inv("scheduling.tolerations.tolerations[0].operator")}},
		{"duplicate tolerations", with(func(rc *nodev1.RuntimeClass) {
			sec := int64(5)
			rc.Scheduling.Tolerations = []corev1.Toleration{
				{Key: "a", Operator: corev1.TolerationOpEqual, Value: "1", Effect: corev1.TaintEffectNoExecute},
				{Key: "a", Operator: corev1.TolerationOpEqual, Value: "1", Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &sec},
				{Key: "a", Operator: corev1.TolerationOpEqual, Value: "2", Effect: corev1.TaintEffectNoExecute},
			}
		}), []want{dup("scheduling.tolerations[1]")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateRuntimeClass(tc.rc), tc.want)
		})
	}
}

func TestValidateRuntimeClassUpdate(t *testing.T) {
	old := validRuntimeClass()
	old.ResourceVersion = "1"
	cases := []struct {
		name string
		f    func(*nodev1.RuntimeClass)
		want []want
	}{
		{"labels", func(rc *nodev1.RuntimeClass) { rc.Labels = map[string]string{"a": "b"} }, nil},
		{"overhead and scheduling may change", func(rc *nodev1.RuntimeClass) {
			rc.Overhead, rc.Scheduling = nil, nil
		}, nil},
		{"handler is immutable", func(rc *nodev1.RuntimeClass) { rc.Handler = "crun" }, []want{immutable("handler")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := old.DeepCopy()
			tc.f(rc)
			checkErrors(t, ValidateRuntimeClassUpdate(rc, old), tc.want)
		})
	}
}
