package validation

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/kubette/kubette/internal/registry/defaults"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func ptr[T any](v T) *T { return &v }

// want is an expected error: its type, field path and (optionally) a
// substring of its detail.
type want struct {
	typ    field.ErrorType
	field  string
	detail string
}

func req(f string) want          { return want{typ: field.ErrorTypeRequired, field: f} }
func inv(f string) want          { return want{typ: field.ErrorTypeInvalid, field: f} }
func invd(f, detail string) want { return want{typ: field.ErrorTypeInvalid, field: f, detail: detail} }
func forb(f string) want         { return want{typ: field.ErrorTypeForbidden, field: f} }
func forbd(f, detail string) want {
	return want{typ: field.ErrorTypeForbidden, field: f, detail: detail}
}
func unsup(f string) want     { return want{typ: field.ErrorTypeNotSupported, field: f} }
func dup(f string) want       { return want{typ: field.ErrorTypeDuplicate, field: f} }
func notFound(f string) want  { return want{typ: field.ErrorTypeNotFound, field: f} }
func tooLong(f string) want   { return want{typ: field.ErrorTypeTooLong, field: f} }
func tooMany(f string) want   { return want{typ: field.ErrorTypeTooMany, field: f} }
func immutable(f string) want { return invd(f, "field is immutable") }

// checkErrors requires errs to be exactly the wanted errors (in any order).
func checkErrors(t *testing.T, errs field.ErrorList, wants []want) {
	t.Helper()
	used := make([]bool, len(errs))
	var missing []string
	for _, w := range wants {
		found := false
		for i, e := range errs {
			if used[i] || e.Type != w.typ || e.Field != w.field || !strings.Contains(e.Detail, w.detail) {
				continue
			}
			used[i], found = true, true
			break
		}
		if !found {
			missing = append(missing, fmt.Sprintf("%s %s %q", w.typ, w.field, w.detail))
		}
	}
	var extra []string
	for i, e := range errs {
		if !used[i] {
			extra = append(extra, e.Error())
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("errors mismatch\nmissing: %v\nunexpected: %v", missing, extra)
	}
}

// createCase is a create validation case built from a valid object.
type createCase struct {
	name   string
	obj    runtime.Object
	errors []want
}

func runCreateCases(t *testing.T, cases []createCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateCreate(tc.obj), tc.errors)
		})
	}
}

// updateCase is an update validation case.
type updateCase struct {
	name     string
	old, obj runtime.Object
	status   bool
	errors   []want
}

func runUpdateCases(t *testing.T, cases []updateCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var errs field.ErrorList
			if tc.status {
				errs = ValidateStatusUpdate(tc.obj, tc.old)
			} else {
				errs = ValidateUpdate(tc.obj, tc.old)
			}
			checkErrors(t, errs, tc.errors)
		})
	}
}

func objectMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default"}
}

// stored turns a defaulted object into what the store returns.
func stored[T interface {
	runtime.Object
	metav1.Object
}](obj T) T {
	obj.SetResourceVersion("10")
	obj.SetUID("6b9d2b4e-4a43-4b5f-9a47-3f4f8c0b6a11")
	obj.SetCreationTimestamp(metav1.Now())
	return obj
}

func defaulted[T runtime.Object](obj T) T {
	defaults.Apply(obj)
	return obj
}

func validPod() *corev1.Pod {
	return defaulted(&corev1.Pod{
		ObjectMeta: objectMeta("web"),
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{
				Name:         "nginx",
				Image:        "nginx:1.27",
				Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				Env:          []corev1.EnvVar{{Name: "MODE", Value: "prod"}},
			}},
		},
	})
}

func validTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}}},
	}
}

func validDeployment() *appsv1.Deployment {
	return defaulted(&appsv1.Deployment{
		ObjectMeta: objectMeta("web"),
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: validTemplate(),
		},
	})
}

func validReplicaSet() *appsv1.ReplicaSet {
	return defaulted(&appsv1.ReplicaSet{
		ObjectMeta: objectMeta("web-abc"),
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: validTemplate(),
		},
	})
}

func validService() *corev1.Service {
	return defaulted(&corev1.Service{
		ObjectMeta: objectMeta("web"),
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	})
}
