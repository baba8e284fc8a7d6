package apiserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/testenv"
)

// TestEphemeralContainersSubresource covers pods/ephemeralcontainers as kubectl debug uses it:
// GET, a strategic merge patch of the whole pod, PUT, and upstream's validation (only
// additions, no ports, probes, resources or lifecycle, unique names).
func TestEphemeralContainersSubresource(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := &semEnv{Env: testenv.Start(t, testenv.Options{})}
	pods := e.Client.CoreV1().Pods("default")
	pod, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "target", Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "img:1"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sub := func(verb string) *rest.Request {
		return e.Client.CoreV1().RESTClient().Verb(verb).Namespace("default").Resource("pods").Name("target").SubResource("ephemeralcontainers")
	}

	// GET answers the pod.
	var got corev1.Pod
	if err := sub("GET").Do(ctx).Into(&got); err != nil || got.Name != "target" || len(got.Spec.Containers) != 1 {
		t.Fatalf("GET ephemeralcontainers: %v %+v", err, got)
	}

	// kubectl debug's strategic merge patch adds a debugger; what else it changes is dropped.
	debug := pod.DeepCopy()
	debug.Labels["app"] = "changed"
	debug.Spec.EphemeralContainers = append(debug.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger-abcde", Image: "busybox:1", Command: []string{"sh", "-c", "echo hi"}},
		TargetContainerName:      "app",
	})
	debug.Spec.ActiveDeadlineSeconds = new(int64)
	patch := twoWayPatch(t, pod, debug)
	out, err := pods.Patch(ctx, "target", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "ephemeralcontainers")
	if err != nil {
		t.Fatalf("PATCH ephemeralcontainers: %v", err)
	}
	if len(out.Spec.EphemeralContainers) != 1 {
		t.Fatalf("ephemeral containers after the patch: %+v", out.Spec.EphemeralContainers)
	}
	ec := out.Spec.EphemeralContainers[0]
	if ec.TerminationMessagePolicy != corev1.TerminationMessageReadFile || ec.ImagePullPolicy != corev1.PullIfNotPresent || ec.TargetContainerName != "app" {
		t.Errorf("the ephemeral container is not defaulted: %+v", ec)
	}
	if out.Labels["app"] != "x" || out.Spec.ActiveDeadlineSeconds != nil {
		t.Errorf("the patch changed more than the ephemeral containers: labels %v activeDeadlineSeconds %v", out.Labels, out.Spec.ActiveDeadlineSeconds)
	}

	// The kubelet's status writes keep them.
	out.Status.Phase = corev1.PodRunning
	if out, err = pods.UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil || len(out.Spec.EphemeralContainers) != 1 {
		t.Fatalf("status update: %v, ephemeral containers %d", err, len(out.Spec.EphemeralContainers))
	}

	for _, tc := range []struct {
		name   string
		mutate func(p *corev1.Pod)
		field  string
		msg    string
	}{
		{"ports", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "d2", Image: "busybox:1", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}})
		}, "spec.ephemeralContainers[1].ports", "cannot be set for an Ephemeral Container"},
		{"lifecycle", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "d2", Image: "busybox:1", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 1}}}}})
		}, "spec.ephemeralContainers[1].lifecycle", "cannot be set for an Ephemeral Container"},
		{"duplicate name", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "app", Image: "busybox:1"}})
		}, "spec.ephemeralContainers[1].name", "Duplicate value"},
		{"unknown target", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "d2", Image: "busybox:1"}, TargetContainerName: "nope"})
		}, "spec.ephemeralContainers[1].targetContainerName", "Not found"},
		{"removed", func(p *corev1.Pod) { p.Spec.EphemeralContainers = nil },
			"spec.ephemeralContainers", `existing ephemeral containers "debugger-abcde" may not be removed`},
		{"changed", func(p *corev1.Pod) { p.Spec.EphemeralContainers[0].Image = "busybox:2" },
			"spec.ephemeralContainers", `existing ephemeral containers "debugger-abcde" may not be changed`},
	} {
		p := out.DeepCopy()
		tc.mutate(p)
		_, err := pods.UpdateEphemeralContainers(ctx, "target", p, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: want 422 %q, got %v", tc.name, tc.msg, err)
			continue
		}
		wantCause(t, err, tc.field)
	}

	// A valid PUT adds a second one.
	p := out.DeepCopy()
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "d2", Image: "busybox:1", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullNever}})
	if out, err = pods.UpdateEphemeralContainers(ctx, "target", p, metav1.UpdateOptions{}); err != nil || len(out.Spec.EphemeralContainers) != 2 {
		t.Fatalf("PUT ephemeralcontainers: %v", err)
	}

	// Not through the pod itself, and no POST.
	p = out.DeepCopy()
	p.Spec.EphemeralContainers = p.Spec.EphemeralContainers[:1]
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("removing an ephemeral container through the pod: want 422, got %v", err)
	}
	res := sub("POST").Body([]byte(`{}`)).Do(ctx)
	var code int
	res.StatusCode(&code)
	if code != http.StatusMethodNotAllowed {
		t.Errorf("POST ephemeralcontainers: HTTP %d, want 405", code)
	}

	// Discovery names the subresource with its verbs.
	list, err := e.Client.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range list.APIResources {
		if r.Name == "pods/ephemeralcontainers" {
			found = strings.Join(r.Verbs, ",") == "get,patch,update" && r.Kind == "Pod"
		}
	}
	if !found {
		t.Error("discovery lacks pods/ephemeralcontainers with get, patch, update")
	}
}

// twoWayPatch is the strategic merge patch from a to b, as kubectl debug computes it.
func twoWayPatch(t *testing.T, a, b *corev1.Pod) []byte {
	t.Helper()
	aj, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	bj, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(aj, bj, a)
	if err != nil {
		t.Fatal(err)
	}
	return patch
}
