package history

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestTemplatePatch checks the bytes upstream 1.32 writes and compares: the template
// with its keys sorted, an unset creationTimestamp as null, and "$patch":"replace".
func TestTemplatePatch(t *testing.T) {
	tmpl := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
	got, err := TemplatePatch(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"app":"a"}},"spec":{"containers":[{"image":"i","name":"c","resources":{}}]}}}}`
	if string(got) != want {
		t.Errorf("patch\n%s\nwant\n%s", got, want)
	}
	back, err := TemplateOf(&appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: got}})
	if err != nil {
		t.Fatal(err)
	}
	if back.Labels["app"] != "a" || back.Spec.Containers[0].Image != "i" {
		t.Errorf("template back %+v", back)
	}
}
