package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/testenv"
)

// semEnv is the control plane shared by the TestSemantics subtests, with a plain
// HTTP client for requests whose headers or raw bodies matter.
type semEnv struct {
	*testenv.Env
	http *http.Client
	dyn  dynamic.Interface
}

func startSem(t *testing.T) *semEnv {
	t.Helper()
	env := testenv.Start(t, testenv.Options{})
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatalf("http client: %v", err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	return &semEnv{Env: env, http: hc, dyn: dyn}
}

// namespace creates a namespace for one subtest, so subtests do not see each other's objects.
func (e *semEnv) namespace(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	if _, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// raw sends one request and returns the response (body already read).
func (e *semEnv) raw(t *testing.T, ctx context.Context, method, path string, header map[string]string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(e.Config.Host, "/")+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp, data
}

// wantStatus decodes a metav1.Status response body and checks its code and reason.
func wantStatus(t *testing.T, what string, resp *http.Response, body []byte, code int, reason metav1.StatusReason) *metav1.Status {
	t.Helper()
	if resp.StatusCode != code {
		t.Fatalf("%s: HTTP %d, want %d; body %s", what, resp.StatusCode, code, body)
	}
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("%s: body is not a Status: %v: %s", what, err, body)
	}
	if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure || st.Code != int32(code) || st.Reason != reason {
		t.Fatalf("%s: got Status %+v, want kind Status, apiVersion v1, Failure, code %d, reason %s", what, st, code, reason)
	}
	return &st
}

// nextEvent waits for the next watch event; ok is false on timeout or a closed channel.
func nextEvent(w watch.Interface, timeout time.Duration) (watch.Event, bool) {
	select {
	case ev, ok := <-w.ResultChan():
		return ev, ok
	case <-time.After(timeout):
		return watch.Event{}, false
	}
}

func wantCause(t *testing.T, err error, field string) {
	t.Helper()
	st, ok := err.(apierrors.APIStatus)
	if !ok || st.Status().Details == nil {
		t.Fatalf("error %v carries no status details", err)
	}
	var fields []string
	for _, c := range st.Status().Details.Causes {
		if c.Field == field {
			return
		}
		fields = append(fields, c.Field)
	}
	t.Fatalf("causes of %v: fields %q, want one with %q", err, fields, field)
}

func TestSemantics(t *testing.T) {
	e := startSem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()

	t.Run("ObjectMeta", func(t *testing.T) { semObjectMeta(t, ctx, e) })
	t.Run("Finalizers", func(t *testing.T) { semFinalizers(t, ctx, e) })
	t.Run("Namespaces", func(t *testing.T) { semNamespaces(t, ctx, e) })
	t.Run("Pods", func(t *testing.T) { semPods(t, ctx, e) })
	t.Run("Scale", func(t *testing.T) { semScale(t, ctx, e) })
	t.Run("Watch", func(t *testing.T) { semWatch(t, ctx, e) })
	t.Run("Errors", func(t *testing.T) { semErrors(t, ctx, e) })
	t.Run("ContentTypes", func(t *testing.T) { semContentTypes(t, ctx, e) })
	t.Run("ServerSideApply", func(t *testing.T) { semApply(t, ctx, e) })
	t.Run("DeleteCollection", func(t *testing.T) { semDeleteCollection(t, ctx, e) })
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name),
		},
	}
}

func semObjectMeta(t *testing.T, ctx context.Context, e *semEnv) {
	ns := e.namespace(t, ctx, "sem-meta")
	deps := e.Client.AppsV1().Deployments(ns)
	cms := e.Client.CoreV1().ConfigMaps(ns)

	d, err := deps.Create(ctx, deployment("d", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.CreationTimestamp.IsZero() || d.ResourceVersion == "" || d.Generation != 1 {
		t.Fatalf("created deployment: uid %q creationTimestamp %v resourceVersion %q generation %d; want all set and generation 1",
			d.UID, d.CreationTimestamp, d.ResourceVersion, d.Generation)
	}
	// Kinds without a spec have no generation.
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cm.Name, "gen-") || len(cm.Name) != len("gen-")+5 || cm.Generation != 0 {
		t.Fatalf("generateName gen-: got name %q generation %d, want gen- plus 5 characters and generation 0", cm.Name, cm.Generation)
	}
	if _, err := cms.Get(ctx, cm.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("get generated %s: %v", cm.Name, err)
	}

	// dryRun=All: the response is the object that would be stored, nothing is stored.
	dry, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dry"}, Data: map[string]string{"k": "v"}},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("dry-run create: %v", err)
	}
	if dry.Name != "dry" || dry.Namespace != ns || dry.UID == "" || dry.CreationTimestamp.IsZero() || dry.Data["k"] != "v" {
		t.Fatalf("dry-run create returned %+v", dry.ObjectMeta)
	}
	if _, err := cms.Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after dry-run create: want NotFound, got %v", err)
	}

	// Metadata-only updates keep the generation; spec updates bump it.
	d.Labels = map[string]string{"l": "1"}
	d2, err := deps.Update(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d2.Generation != 1 || d2.ResourceVersion == d.ResourceVersion {
		t.Fatalf("label update: generation %d (want 1), resourceVersion %s→%s (want a new one)", d2.Generation, d.ResourceVersion, d2.ResourceVersion)
	}
	d2.Spec.Replicas = ptr.To[int32](2)
	d3, err := deps.Update(ctx, d2, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d3.Generation != 2 {
		t.Fatalf("spec update: generation %d, want 2", d3.Generation)
	}

	// Status written through the main resource is dropped.
	d3.Status.Replicas, d3.Status.ObservedGeneration = 5, 7
	d3.Labels["l"] = "2"
	d4, err := deps.Update(ctx, d3, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d4.Status.Replicas != 0 || d4.Status.ObservedGeneration != 0 || d4.Labels["l"] != "2" {
		t.Fatalf("update through main resource: status %+v labels %v; want status untouched and the label written", d4.Status, d4.Labels)
	}
	// Spec written through /status is dropped, and the generation does not move.
	d4.Status.Replicas = 3
	d4.Spec.Replicas = ptr.To[int32](9)
	d5, err := deps.UpdateStatus(ctx, d4, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d5.Status.Replicas != 3 || *d5.Spec.Replicas != 2 || d5.Generation != 2 {
		t.Fatalf("update through /status: status.replicas %d (want 3), spec.replicas %d (want 2), generation %d (want 2)",
			d5.Status.Replicas, *d5.Spec.Replicas, d5.Generation)
	}
	got, err := deps.Get(ctx, "d", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Replicas != 2 || got.Status.Replicas != 3 {
		t.Fatalf("stored deployment: spec.replicas %d status.replicas %d, want 2 and 3", *got.Spec.Replicas, got.Status.Replicas)
	}

	// A no-op update writes nothing.
	same, err := deps.Update(ctx, got.DeepCopy(), metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if same.ResourceVersion != got.ResourceVersion || same.Generation != got.Generation {
		t.Fatalf("no-op update: resourceVersion %s→%s generation %d→%d, want both unchanged",
			got.ResourceVersion, same.ResourceVersion, got.Generation, same.Generation)
	}
	cm2, err := cms.Update(ctx, cm.DeepCopy(), metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm2.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("no-op configmap update: resourceVersion %s→%s", cm.ResourceVersion, cm2.ResourceVersion)
	}
}

func semFinalizers(t *testing.T, ctx context.Context, e *semEnv) {
	ns := e.namespace(t, ctx, "sem-fin")
	cms := e.Client.CoreV1().ConfigMaps(ns)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "f", Finalizers: []string{"example.com/x"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion, FieldSelector: "metadata.name=f"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	if err := cms.Delete(ctx, "f", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	marked, err := cms.Get(ctx, "f", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after delete with a finalizer: %v", err)
	}
	if marked.DeletionTimestamp == nil || marked.DeletionGracePeriodSeconds == nil || *marked.DeletionGracePeriodSeconds != 0 ||
		fmt.Sprint(marked.Finalizers) != "[example.com/x]" {
		t.Fatalf("marked object: deletionTimestamp %v gracePeriod %v finalizers %v", marked.DeletionTimestamp, marked.DeletionGracePeriodSeconds, marked.Finalizers)
	}
	// A second delete changes nothing.
	if err := cms.Delete(ctx, "f", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	marked2, err := cms.Get(ctx, "f", metav1.GetOptions{})
	if err != nil || marked2.ResourceVersion != marked.ResourceVersion {
		t.Fatalf("second delete of a marked object: err %v, resourceVersion %s→%s", err, marked.ResourceVersion, marked2.ResourceVersion)
	}

	marked.Finalizers = nil
	if _, err := cms.Update(ctx, marked, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update removing the last finalizer: %v", err)
	}
	if _, err := cms.Get(ctx, "f", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after the last finalizer went: want NotFound, got %v", err)
	}
	var seen []string
	for len(seen) < 2 {
		ev, ok := nextEvent(w, 5*time.Second)
		if !ok {
			break
		}
		o := ev.Object.(*corev1.ConfigMap)
		seen = append(seen, fmt.Sprintf("%s dt=%v fin=%v", ev.Type, o.DeletionTimestamp != nil, o.Finalizers))
	}
	// The DELETED event carries the last stored state, as etcd's previous value does upstream:
	// the update that removed the last finalizer deletes without writing first.
	if want := "[MODIFIED dt=true fin=[example.com/x] DELETED dt=true fin=[example.com/x]]"; fmt.Sprint(seen) != want {
		t.Fatalf("watch events: got %s, want %s", seen, want)
	}
	if ev, ok := nextEvent(w, 300*time.Millisecond); ok {
		t.Fatalf("unexpected extra watch event %s", ev.Type)
	}

	for _, tc := range []struct {
		policy    metav1.DeletionPropagation
		finalizer string
	}{{metav1.DeletePropagationOrphan, metav1.FinalizerOrphanDependents}, {metav1.DeletePropagationForeground, metav1.FinalizerDeleteDependents}} {
		name := strings.ToLower(string(tc.policy))
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The response is the object marked for deletion (read from it rather than with a
		// later GET, which a garbage collector could have beaten).
		resp, body := e.raw(t, ctx, "DELETE", "/api/v1/namespaces/"+ns+"/configmaps/"+name+"?propagationPolicy="+string(tc.policy), map[string]string{"Accept": "application/json"}, nil)
		var got corev1.ConfigMap
		if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode/100 != 2 || got.Kind != "ConfigMap" {
			t.Fatalf("delete %s: HTTP %d %v: %s", tc.policy, resp.StatusCode, err, body)
		}
		if got.DeletionTimestamp == nil || fmt.Sprint(got.Finalizers) != "["+tc.finalizer+"]" {
			t.Fatalf("%s delete: deletionTimestamp %v finalizers %v, want set and [%s]", tc.policy, got.DeletionTimestamp, got.Finalizers, tc.finalizer)
		}
		// No garbage collector runs here; finish the deletion by hand.
		if cur, err := cms.Get(ctx, name, metav1.GetOptions{}); err == nil {
			cur.Finalizers = nil
			if _, err := cms.Update(ctx, cur, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				t.Fatal(err)
			}
		}
		if _, err := cms.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s: get after removing the finalizer: want NotFound, got %v", name, err)
		}
	}
}

func semNamespaces(t *testing.T, ctx context.Context, e *semEnv) {
	_, err := e.Client.CoreV1().ConfigMaps("nope").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) || err.Error() != `namespaces "nope" not found` {
		t.Fatalf("create in a missing namespace: got %v, want NotFound namespaces \"nope\" not found", err)
	}
	st := err.(apierrors.APIStatus).Status()
	if st.Details == nil || st.Details.Name != "nope" || st.Details.Kind != "namespaces" {
		t.Fatalf("details: %+v, want name nope kind namespaces", st.Details)
	}
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		n, err := e.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("namespace %s: %v", name, err)
		}
		if n.Status.Phase != corev1.NamespaceActive || fmt.Sprint(n.Spec.Finalizers) != "[kubernetes]" || n.Labels["kubernetes.io/metadata.name"] != name {
			t.Fatalf("namespace %s: phase %q finalizers %v labels %v", name, n.Status.Phase, n.Spec.Finalizers, n.Labels)
		}
	}
}

func semPods(t *testing.T, ctx context.Context, e *semEnv) {
	ns := e.namespace(t, ctx, "sem-pods")
	pods := e.Client.CoreV1().Pods(ns)

	// A scheduled pod is deleted gracefully.
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sched"}, Spec: podTemplate("x").Spec}
	p.Spec.NodeName = "node-1"
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "sched", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := pods.Get(ctx, "sched", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after graceful delete: %v", err)
	}
	if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 30 {
		t.Fatalf("graceful delete: deletionTimestamp %v deletionGracePeriodSeconds %v, want set and 30", got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
	}
	if d := time.Until(got.DeletionTimestamp.Time); d < 20*time.Second || d > 31*time.Second {
		t.Fatalf("deletionTimestamp %v is %v away, want about 30s", got.DeletionTimestamp, d)
	}
	if err := pods.Delete(ctx, "sched", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "sched", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete with grace 0: want NotFound, got %v", err)
	}

	// An unscheduled pod goes at once.
	if _, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unsched"}, Spec: podTemplate("x").Spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "unsched", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "unsched", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after deleting an unscheduled pod: want NotFound, got %v", err)
	}

	// Binding.
	if _, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: podTemplate("x").Spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
	if err := pods.Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	bound, err := pods.Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scheduled := false
	for _, c := range bound.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			scheduled = true
		}
	}
	if bound.Spec.NodeName != "node-1" || !scheduled {
		t.Fatalf("bound pod: nodeName %q conditions %+v, want node-1 and PodScheduled=True", bound.Spec.NodeName, bound.Status.Conditions)
	}
	binding.Target.Name = "node-2"
	if err := pods.Bind(ctx, binding, metav1.CreateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("second bind: want 409 Conflict, got %v", err)
	}

	// A pod with scheduling gates says so and cannot be bound until they are gone.
	gatedSpec := podTemplate("x").Spec
	gatedSpec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
	gated, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gated"}, Spec: gatedSpec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := gated.Status.Conditions; len(c) != 1 || c[0].Type != corev1.PodScheduled || c[0].Status != corev1.ConditionFalse ||
		c[0].Reason != corev1.PodReasonSchedulingGated || c[0].Message != "Scheduling is blocked due to non-empty scheduling gates" {
		t.Fatalf("gated pod's conditions %+v, want PodScheduled=False SchedulingGated", c)
	}
	gatedBinding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "gated"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
	if err := pods.Bind(ctx, gatedBinding, metav1.CreateOptions{}); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "pod gated has non-empty .spec.schedulingGates") {
		t.Fatalf("binding a gated pod: want 409 naming the gates, got %v", err)
	}
	gated.Spec.SchedulingGates = nil
	if _, err := pods.Update(ctx, gated, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("removing the gates: %v", err)
	}
	if err := pods.Bind(ctx, gatedBinding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("binding once the gates are gone: %v", err)
	}
	if ungated, err := pods.Get(ctx, "gated", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if c := ungated.Status.Conditions; len(c) != 1 || c[0].Status != corev1.ConditionTrue || c[0].Reason != "" {
		t.Fatalf("bound formerly gated pod's conditions %+v, want only PodScheduled=True", c)
	}

	// Pod specs are immutable but for a few fields.
	bound.Spec.Containers[0].Name = "renamed"
	_, err = pods.Update(ctx, bound, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("renaming a container: want 422 Invalid, got %v", err)
	}
	wantCause(t, err, "spec")
	if !strings.Contains(err.Error(), "pod updates may not change fields other than") {
		t.Fatalf("renaming a container: message %q", err.Error())
	}
}

func semScale(t *testing.T, ctx context.Context, e *semEnv) {
	ns := e.namespace(t, ctx, "sem-scale")
	deps := e.Client.AppsV1().Deployments(ns)
	rss := e.Client.AppsV1().ReplicaSets(ns)
	if _, err := deps.Create(ctx, deployment("web", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs"}, Spec: appsv1.ReplicaSetSpec{
		Replicas: ptr.To[int32](1),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rs"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}},
		Template: podTemplate("rs"),
	}}
	rs.Spec.Template.Labels["tier"] = "a"
	if _, err := rss.Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	type scaler struct {
		name, resource, selector string
		replicas                 int32
		get                      func() (*autoscalingv1.Scale, error)
		update                   func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error)
		specReplicas             func() int32
	}
	for _, sc := range []scaler{
		{
			name: "web", resource: "deployments", selector: "app=web", replicas: 2,
			get: func() (*autoscalingv1.Scale, error) { return deps.GetScale(ctx, "web", metav1.GetOptions{}) },
			update: func(s *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
				return deps.UpdateScale(ctx, "web", s, metav1.UpdateOptions{})
			},
			specReplicas: func() int32 {
				d, err := deps.Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return *d.Spec.Replicas
			},
		},
		{
			name: "rs", resource: "replicasets", selector: "app=rs,tier in (a,b)", replicas: 1,
			get: func() (*autoscalingv1.Scale, error) { return rss.GetScale(ctx, "rs", metav1.GetOptions{}) },
			update: func(s *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
				return rss.UpdateScale(ctx, "rs", s, metav1.UpdateOptions{})
			},
			specReplicas: func() int32 {
				r, err := rss.Get(ctx, "rs", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return *r.Spec.Replicas
			},
		},
	} {
		t.Run(sc.resource, func(t *testing.T) {
			s, err := sc.get()
			if err != nil {
				t.Fatalf("get scale: %v", err)
			}
			if s.Name != sc.name || s.Namespace != ns || s.UID == "" || s.ResourceVersion == "" || s.Spec.Replicas != sc.replicas || s.Status.Selector != sc.selector {
				t.Fatalf("scale: %+v, want name %s replicas %d selector %q", s, sc.name, sc.replicas, sc.selector)
			}
			// The wire kind is autoscaling/v1 Scale.
			resp, body := e.raw(t, ctx, "GET", "/apis/apps/v1/namespaces/"+ns+"/"+sc.resource+"/"+sc.name+"/scale", nil, nil)
			var tm metav1.TypeMeta
			if err := json.Unmarshal(body, &tm); resp.StatusCode != 200 || err != nil || tm.APIVersion != "autoscaling/v1" || tm.Kind != "Scale" {
				t.Fatalf("raw scale GET: HTTP %d type %+v: %s", resp.StatusCode, tm, body)
			}
			s.Spec.Replicas = 4
			up, err := sc.update(s)
			if err != nil {
				t.Fatalf("update scale: %v", err)
			}
			if up.Spec.Replicas != 4 || up.ResourceVersion == s.ResourceVersion || sc.specReplicas() != 4 {
				t.Fatalf("update scale: %+v; parent has %d replicas, want 4", up, sc.specReplicas())
			}
			// A stale resourceVersion on the Scale is a precondition.
			s.Spec.Replicas = 6
			if _, err := sc.update(s); !apierrors.IsConflict(err) {
				t.Fatalf("update scale with a stale resourceVersion: want 409, got %v", err)
			}
			// A merge patch on the scale subresource through the dynamic client.
			gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: sc.resource}
			u, err := e.dyn.Resource(gvr).Namespace(ns).Patch(ctx, sc.name, types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{}, "scale")
			if err != nil {
				t.Fatalf("merge patch scale: %v", err)
			}
			if u.GetKind() != "Scale" || u.GetAPIVersion() != "autoscaling/v1" {
				t.Fatalf("patched scale is %s %s", u.GetAPIVersion(), u.GetKind())
			}
			if r, _, _ := unstructuredInt(u.Object, "spec", "replicas"); r != 5 || sc.specReplicas() != 5 {
				t.Fatalf("merge patch scale: spec.replicas %d, parent %d, want 5", r, sc.specReplicas())
			}
		})
	}
}

func unstructuredInt(obj map[string]any, path ...string) (int64, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = m[p]
	}
	switch v := cur.(type) {
	case int64:
		return v, true, nil
	case float64:
		return int64(v), true, nil
	}
	return 0, false, fmt.Errorf("%v is %T", path, cur)
}

func semWatch(t *testing.T, ctx context.Context, e *semEnv) {
	ns := e.namespace(t, ctx, "sem-watch")
	cms := e.Client.CoreV1().ConfigMaps(ns)
	a, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.Data = map[string]string{"v": "1"}
	a2, err := cms.Update(ctx, a, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("FromResourceVersion", func(t *testing.T) {
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: a.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		var got []string
		for {
			ev, ok := nextEvent(w, 500*time.Millisecond)
			if !ok {
				break
			}
			o := ev.Object.(*corev1.ConfigMap)
			got = append(got, fmt.Sprintf("%s %s %s", ev.Type, o.Name, o.ResourceVersion))
		}
		want := fmt.Sprint([]string{"MODIFIED a " + a2.ResourceVersion, "ADDED b " + b.ResourceVersion})
		if fmt.Sprint(got) != want {
			t.Fatalf("watch from %s: got %v, want %s", a.ResourceVersion, got, want)
		}
	})

	t.Run("FromResourceVersionOne", func(t *testing.T) {
		// Each watch cache starts from a list at the storage revision it found at start-up
		// (revision 1 on a fresh etcd, before the default namespaces are written) and keeps
		// a window of 4096 events after it. A watch from revision 1 is therefore not too
		// old here: it replays the whole history (upstream: resourceVersion < oldest-1 is
		// 410 Expired, and oldest-1 is the list revision, so also no error). The 410 path
		// needs more than 4096 configmap changes and is not exercised.
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
		if err != nil {
			t.Fatalf("watch from 1: %v", err)
		}
		defer w.Stop()
		var got []string
		for {
			ev, ok := nextEvent(w, 500*time.Millisecond)
			if !ok {
				break
			}
			o, isCM := ev.Object.(*corev1.ConfigMap)
			if !isCM {
				t.Fatalf("watch from 1: %s %#v", ev.Type, ev.Object)
			}
			got = append(got, fmt.Sprintf("%s %s %s", ev.Type, o.Name, o.ResourceVersion))
		}
		want := fmt.Sprint([]string{"ADDED a " + a.ResourceVersion, "MODIFIED a " + a2.ResourceVersion, "ADDED b " + b.ResourceVersion})
		if fmt.Sprint(got) != want {
			t.Fatalf("watch from 1: got %v, want %s", got, want)
		}
	})

	t.Run("FutureResourceVersion", func(t *testing.T) {
		// A watch from a revision the server has not reached waits; changes up to that
		// revision are not sent.
		rv, _ := strconv.ParseInt(b.ResourceVersion, 10, 64)
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(rv+1000, 10)})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if ev, ok := nextEvent(w, 700*time.Millisecond); ok {
			t.Fatalf("watch from the future: got %s %+v, want nothing yet", ev.Type, ev.Object)
		}
		if err := cms.Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// Let the watch cache see the delete before the watch-list below: kubette's
		// initial-events-end bookmark does not wait for the cache to catch up with
		// storage (reported separately), so c could otherwise still be listed.
		for i := 0; ; i++ {
			l, err := cms.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Items) == 2 {
				break
			}
			if i == 100 {
				t.Fatalf("the cached list still has %d items", len(l.Items))
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("WatchList", func(t *testing.T) {
		w, err := cms.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		// The state at the bookmark is what the initial events add up to (upstream may
		// deliver changes that raced with the request before the bookmark).
		state := map[string]bool{}
		for {
			ev, ok := nextEvent(w, 5*time.Second)
			if !ok {
				t.Fatalf("watch list ended after %v without the initial-events-end bookmark", state)
			}
			o := ev.Object.(*corev1.ConfigMap)
			if ev.Type == watch.Bookmark {
				if o.Annotations[metav1.InitialEventsAnnotationKey] != "true" || o.ResourceVersion == "" {
					t.Fatalf("bookmark: annotations %v resourceVersion %q", o.Annotations, o.ResourceVersion)
				}
				break
			}
			if ev.Type == watch.Deleted {
				delete(state, o.Name)
			} else {
				state[o.Name] = true
			}
		}
		var names []string
		for n := range state {
			names = append(names, n)
		}
		sort.Strings(names)
		if fmt.Sprint(names) != "[a b kube-root-ca.crt]" && fmt.Sprint(names) != "[a b]" {
			t.Fatalf("state at the initial-events-end bookmark: %v, want a and b", names)
		}
		// Later changes follow.
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "d"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for {
			ev, ok := nextEvent(w, 5*time.Second)
			if !ok {
				t.Fatal("no event for d")
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			if o := ev.Object.(*corev1.ConfigMap); ev.Type != watch.Added || o.Name != "d" {
				t.Fatalf("after the bookmark: %s %s, want ADDED d", ev.Type, o.Name)
			}
			break
		}
	})

	t.Run("WatchListWithoutBookmarks", func(t *testing.T) {
		_, err := cms.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		if !apierrors.IsInvalid(err) {
			t.Fatalf("sendInitialEvents without allowWatchBookmarks: want 422 Invalid, got %v", err)
		}
		wantCause(t, err, "allowWatchBookmarks")
	})

	t.Run("TimeoutSeconds", func(t *testing.T) {
		start := time.Now()
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: b.ResourceVersion, TimeoutSeconds: ptr.To[int64](1)})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		for {
			_, ok := <-w.ResultChan()
			if !ok {
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatal("watch with timeoutSeconds=1 still running after 10s")
			}
		}
		if d := time.Since(start); d < 900*time.Millisecond || d > 3*time.Second {
			t.Fatalf("watch with timeoutSeconds=1 ended after %v", d)
		}
	})
}

func semErrors(t *testing.T, ctx context.Context, e *semEnv) {
	ns := e.namespace(t, ctx, "sem-err")
	cmPath := "/api/v1/namespaces/" + ns + "/configmaps"
	jsonHdr := map[string]string{"Content-Type": "application/json", "Accept": "application/json"}

	t.Run("BodyTooLarge", func(t *testing.T) {
		big := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"k":%q}}`, strings.Repeat("x", 3*1024*1024))
		resp, body := e.raw(t, ctx, "POST", cmPath, jsonHdr, []byte(big))
		st := wantStatus(t, "3 MiB body", resp, body, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge)
		if st.Message != "Request entity too large: limit is 3145728" {
			t.Fatalf("3 MiB body: message %q", st.Message)
		}
		// Through client-go too.
		_, err := e.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Data: map[string]string{"k": strings.Repeat("x", 3*1024*1024)}}, metav1.CreateOptions{})
		if !apierrors.IsRequestEntityTooLargeError(err) {
			t.Fatalf("client-go create of a 3 MiB configmap: want 413, got %v", err)
		}
	})

	t.Run("MalformedJSON", func(t *testing.T) {
		resp, body := e.raw(t, ctx, "POST", cmPath, jsonHdr, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":`))
		wantStatus(t, "malformed JSON", resp, body, http.StatusBadRequest, metav1.StatusReasonBadRequest)
	})

	t.Run("UnknownPatchType", func(t *testing.T) {
		if _, err := e.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		resp, body := e.raw(t, ctx, "PATCH", cmPath+"/p", map[string]string{"Content-Type": "application/x-bogus-patch", "Accept": "application/json"}, []byte(`{}`))
		wantStatus(t, "unknown patch type", resp, body, http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType)
		_, err := e.Client.CoreV1().ConfigMaps(ns).Patch(ctx, "p", types.PatchType("application/x-bogus-patch"), []byte(`{}`), metav1.PatchOptions{})
		if !apierrors.IsUnsupportedMediaType(err) {
			t.Fatalf("client-go patch with an unknown type: want 415, got %v", err)
		}
	})

	unknown := func(name string) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"bogus":1,"data":{"k":"v"}}`, name))
	}
	t.Run("StrictFieldValidation", func(t *testing.T) {
		resp, body := e.raw(t, ctx, "POST", cmPath+"?fieldValidation=Strict", jsonHdr, unknown("strict"))
		st := wantStatus(t, "fieldValidation=Strict", resp, body, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		if !strings.Contains(st.Message, `strict decoding error: unknown field "bogus"`) {
			t.Fatalf("fieldValidation=Strict: message %q, want it to contain strict decoding error: unknown field \"bogus\"", st.Message)
		}
		if _, err := e.Client.CoreV1().ConfigMaps(ns).Get(ctx, "strict", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("strict create stored the object: %v", err)
		}
	})

	t.Run("WarnFieldValidation", func(t *testing.T) {
		resp, body := e.raw(t, ctx, "POST", cmPath+"?fieldValidation=Warn", jsonHdr, unknown("warn"))
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("fieldValidation=Warn: HTTP %d: %s", resp.StatusCode, body)
		}
		if got := resp.Header.Values("Warning"); fmt.Sprint(got) != `[299 - "unknown field \"bogus\""]` {
			t.Fatalf("fieldValidation=Warn: Warning headers %q", got)
		}
		// Warn is also the default for JSON bodies.
		resp, body = e.raw(t, ctx, "POST", cmPath, jsonHdr, unknown("default"))
		if resp.StatusCode != http.StatusCreated || len(resp.Header.Values("Warning")) != 1 {
			t.Fatalf("default field validation: HTTP %d Warning %q: %s", resp.StatusCode, resp.Header.Values("Warning"), body)
		}
		// Ignore drops the field silently.
		resp, body = e.raw(t, ctx, "POST", cmPath+"?fieldValidation=Ignore", jsonHdr, unknown("ignore"))
		if resp.StatusCode != http.StatusCreated || len(resp.Header.Values("Warning")) != 0 {
			t.Fatalf("fieldValidation=Ignore: HTTP %d Warning %q: %s", resp.StatusCode, resp.Header.Values("Warning"), body)
		}
	})

	t.Run("SelectorMismatch", func(t *testing.T) {
		d := deployment("mismatch", 1)
		d.Spec.Template.Labels = map[string]string{"app": "other"}
		_, err := e.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Fatalf("selector not matching the template: want 422, got %v", err)
		}
		wantCause(t, err, "spec.template.metadata.labels")
		if !strings.Contains(err.Error(), "`selector` does not match template `labels`") {
			t.Fatalf("message %q", err.Error())
		}
	})
}

func semContentTypes(t *testing.T, ctx context.Context, e *semEnv) {
	ns := e.namespace(t, ctx, "sem-ct")
	for _, n := range []string{"one", "two"} {
		if _, err := e.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}, Data: map[string]string{"k": n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	objPath := "/api/v1/namespaces/" + ns + "/configmaps/one"

	t.Run("Protobuf", func(t *testing.T) {
		resp, body := e.raw(t, ctx, "GET", objPath, map[string]string{"Accept": "application/vnd.kubernetes.protobuf"}, nil)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/vnd.kubernetes.protobuf" || !bytes.HasPrefix(body, []byte("k8s\x00")) {
			t.Fatalf("protobuf GET: HTTP %d Content-Type %q body %q", resp.StatusCode, resp.Header.Get("Content-Type"), body[:min(len(body), 16)])
		}
		// And a protobuf-speaking client-go reads it.
		cfg := rest.CopyConfig(e.Config)
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
		pc, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cm, err := pc.CoreV1().ConfigMaps(ns).Get(ctx, "one", metav1.GetOptions{})
		if err != nil || cm.Data["k"] != "one" {
			t.Fatalf("protobuf client get: %v %v", cm, err)
		}
	})

	t.Run("YAML", func(t *testing.T) {
		resp, body := e.raw(t, ctx, "GET", objPath, map[string]string{"Accept": "application/yaml"}, nil)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/yaml" ||
			!bytes.HasPrefix(body, []byte("apiVersion: v1\n")) || !bytes.Contains(body, []byte("\nkind: ConfigMap\n")) || !bytes.Contains(body, []byte("  name: one\n")) {
			t.Fatalf("YAML GET: HTTP %d Content-Type %q body %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	})

	t.Run("Table", func(t *testing.T) {
		resp, body := e.raw(t, ctx, "GET", "/api/v1/namespaces/"+ns+"/configmaps", map[string]string{"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}, nil)
		var tbl metav1.Table
		if err := json.Unmarshal(body, &tbl); resp.StatusCode != 200 || err != nil {
			t.Fatalf("Table GET: HTTP %d %v: %s", resp.StatusCode, err, body)
		}
		if tbl.Kind != "Table" || tbl.APIVersion != "meta.k8s.io/v1" || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("Table GET: kind %s apiVersion %s Content-Type %q", tbl.Kind, tbl.APIVersion, resp.Header.Get("Content-Type"))
		}
		var cols []string
		for _, c := range tbl.ColumnDefinitions {
			cols = append(cols, c.Name)
		}
		if fmt.Sprint(cols) != "[Name Data Age]" {
			t.Fatalf("Table columns %v, want [Name Data Age]", cols)
		}
		var names []string
		for _, r := range tbl.Rows {
			names = append(names, fmt.Sprint(r.Cells[0]))
			if len(r.Cells) != 3 || r.Object.Raw == nil {
				t.Fatalf("row %v: %d cells, object %s", r.Cells, len(r.Cells), r.Object.Raw)
			}
		}
		sort.Strings(names)
		if fmt.Sprint(names) != "[one two]" && fmt.Sprint(names) != "[kube-root-ca.crt one two]" {
			t.Fatalf("Table rows %v", names)
		}
	})

	t.Run("AggregatedDiscovery", func(t *testing.T) {
		const accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
		resp, body := e.raw(t, ctx, "GET", "/apis", map[string]string{"Accept": accept + ",application/json"}, nil)
		var list struct {
			metav1.TypeMeta
			Items []struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			} `json:"items"`
		}
		if err := json.Unmarshal(body, &list); resp.StatusCode != 200 || err != nil {
			t.Fatalf("aggregated discovery: HTTP %d %v", resp.StatusCode, err)
		}
		if list.Kind != "APIGroupDiscoveryList" || list.APIVersion != "apidiscovery.k8s.io/v2" || resp.Header.Get("Content-Type") != accept {
			t.Fatalf("aggregated discovery: %s %s Content-Type %q", list.APIVersion, list.Kind, resp.Header.Get("Content-Type"))
		}
		found := false
		for _, it := range list.Items {
			found = found || it.Metadata.Name == "apps"
		}
		if !found {
			t.Fatalf("aggregated discovery of /apis has no apps group")
		}
		// Without the aggregated type, the legacy APIGroupList.
		resp, body = e.raw(t, ctx, "GET", "/apis", map[string]string{"Accept": "application/json"}, nil)
		var legacy metav1.APIGroupList
		if err := json.Unmarshal(body, &legacy); resp.StatusCode != 200 || err != nil || legacy.Kind != "APIGroupList" {
			t.Fatalf("legacy discovery: HTTP %d %v kind %q", resp.StatusCode, err, legacy.Kind)
		}
	})

	t.Run("Metrics", func(t *testing.T) {
		resp, body := e.raw(t, ctx, "GET", "/metrics", nil, nil)
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte("apiserver_request_total{")) {
			t.Fatalf("/metrics: HTTP %d, no apiserver_request_total sample", resp.StatusCode)
		}
	})

	t.Run("OpenAPIv3", func(t *testing.T) {
		resp, body := e.raw(t, ctx, "GET", "/openapi/v3", nil, nil)
		var idx struct {
			Paths map[string]struct {
				ServerRelativeURL string `json:"serverRelativeURL"`
			} `json:"paths"`
		}
		if err := json.Unmarshal(body, &idx); resp.StatusCode != 200 || err != nil {
			t.Fatalf("/openapi/v3: HTTP %d %v", resp.StatusCode, err)
		}
		p, ok := idx.Paths["apis/apps/v1"]
		if !ok || !strings.HasPrefix(p.ServerRelativeURL, "/openapi/v3/apis/apps/v1") {
			t.Fatalf("/openapi/v3 paths: apis/apps/v1 %v %+v", ok, p)
		}
		if _, ok := idx.Paths["api/v1"]; !ok {
			t.Fatal("/openapi/v3 lacks api/v1")
		}
		resp, body = e.raw(t, ctx, "GET", p.ServerRelativeURL, nil, nil)
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte("io.k8s.api.apps.v1.Deployment")) {
			t.Fatalf("GET %s: HTTP %d, no Deployment schema", p.ServerRelativeURL, resp.StatusCode)
		}
	})

	t.Run("OpenAPIv2", func(t *testing.T) {
		// client-go's discovery asks for the protobuf form, as kubectl's validation
		// and Helm do.
		doc, err := e.Client.Discovery().OpenAPISchema()
		if err != nil {
			t.Fatalf("OpenAPISchema: %v", err)
		}
		found := false
		for _, d := range doc.GetDefinitions().GetAdditionalProperties() {
			if d.GetName() == "io.k8s.api.apps.v1.Deployment" {
				found = true
			}
		}
		if doc.GetSwagger() != "2.0" || !found {
			t.Fatalf("/openapi/v2: swagger %q, Deployment definition %v", doc.GetSwagger(), found)
		}
		resp, body := e.raw(t, ctx, "GET", "/openapi/v2", nil, nil)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || !bytes.Contains(body, []byte(`"swagger":"2.0"`)) {
			t.Fatalf("GET /openapi/v2: HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	})
}

func semApply(t *testing.T, ctx context.Context, e *semEnv) {
	ns := e.namespace(t, ctx, "sem-ssa")
	cms := e.Client.CoreV1().ConfigMaps(ns)
	cm, err := cms.Apply(ctx, corev1ac.ConfigMap("ssa", ns).WithData(map[string]string{"k": "a", "own": "a"}), metav1.ApplyOptions{FieldManager: "mgr-a"})
	if err != nil {
		t.Fatalf("apply create: %v", err)
	}
	if cm.UID == "" || cm.Data["k"] != "a" || cm.Data["own"] != "a" {
		t.Fatalf("apply create: %+v", cm)
	}
	// (The operation of the entry is checked by TestSemanticsApplyRecordsApplyOperation,
	// kept out of the tree while kubette records Update.)
	if len(cm.ManagedFields) != 1 || cm.ManagedFields[0].Manager != "mgr-a" || cm.ManagedFields[0].FieldsType != "FieldsV1" ||
		!strings.Contains(string(cm.ManagedFields[0].FieldsV1.Raw), `"f:k":{}`) {
		t.Fatalf("managedFields after apply create: %+v", cm.ManagedFields)
	}

	// Applying the same configuration again is a no-op.
	again, err := cms.Apply(ctx, corev1ac.ConfigMap("ssa", ns).WithData(map[string]string{"k": "a", "own": "a"}), metav1.ApplyOptions{FieldManager: "mgr-a"})
	if err != nil || again.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("re-apply of the same configuration: %v, resourceVersion %s→%s", err, cm.ResourceVersion, again.ResourceVersion)
	}

	// Another manager setting a field mgr-a owns to another value conflicts.
	_, err = cms.Apply(ctx, corev1ac.ConfigMap("ssa", ns).WithData(map[string]string{"k": "b"}), metav1.ApplyOptions{FieldManager: "mgr-b"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("conflicting apply: want 409 Conflict, got %v", err)
	}
	if !strings.Contains(err.Error(), `conflict with "mgr-a"`) || !strings.Contains(err.Error(), ".data.k") {
		t.Fatalf("conflict message %q", err.Error())
	}
	wantCause(t, err, ".data.k")
	if cur, err := cms.Get(ctx, "ssa", metav1.GetOptions{}); err != nil || cur.Data["k"] != "a" || cur.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("the conflicting apply wrote: %v %v", cur, err)
	}
	// Setting it to the same value is shared ownership, not a conflict.
	if _, err := cms.Apply(ctx, corev1ac.ConfigMap("ssa", ns).WithData(map[string]string{"own": "a"}), metav1.ApplyOptions{FieldManager: "mgr-c"}); err != nil {
		t.Fatalf("apply of an equal value: %v", err)
	}

	// With force the second manager wins.
	forced, err := cms.Apply(ctx, corev1ac.ConfigMap("ssa", ns).WithData(map[string]string{"k": "b"}), metav1.ApplyOptions{FieldManager: "mgr-b", Force: true})
	if err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	if forced.Data["k"] != "b" || forced.Data["own"] != "a" {
		t.Fatalf("forced apply: data %v, want k=b own=a", forced.Data)
	}
	// And mgr-a now conflicts with it.
	if _, err := cms.Apply(ctx, corev1ac.ConfigMap("ssa", ns).WithData(map[string]string{"k": "a", "own": "a"}), metav1.ApplyOptions{FieldManager: "mgr-a"}); !apierrors.IsConflict(err) {
		t.Fatalf("mgr-a applying its old value after losing the field: want 409, got %v", err)
	}
}

func semDeleteCollection(t *testing.T, ctx context.Context, e *semEnv) {
	ns := e.namespace(t, ctx, "sem-dc")
	cms := e.Client.CoreV1().ConfigMaps(ns)
	for name, v := range map[string]string{"x1": "yes", "x2": "yes", "y1": "no", "y2": ""} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if v != "" {
			cm.Labels = map[string]string{"del": v}
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "del=yes"}); err != nil {
		t.Fatalf("deletecollection: %v", err)
	}
	l, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range l.Items {
		if it.Name != "kube-root-ca.crt" {
			names = append(names, it.Name)
		}
	}
	sort.Strings(names)
	if fmt.Sprint(names) != "[y1 y2]" {
		t.Fatalf("after deletecollection del=yes: %v, want [y1 y2]", names)
	}
	// The response lists the deleted objects.
	resp, body := e.raw(t, ctx, "DELETE", "/api/v1/namespaces/"+ns+"/configmaps?labelSelector=del%3Dno", map[string]string{"Accept": "application/json"}, nil)
	var dl corev1.ConfigMapList
	if err := json.Unmarshal(body, &dl); resp.StatusCode != 200 || err != nil || dl.Kind != "ConfigMapList" || len(dl.Items) != 1 || dl.Items[0].Name != "y1" {
		t.Fatalf("raw deletecollection del=no: HTTP %d %v: %s", resp.StatusCode, err, body)
	}
	if _, err := cms.Get(ctx, "y2", metav1.GetOptions{}); err != nil {
		t.Fatalf("unlabelled y2 went too: %v", err)
	}
}

// TestSemanticsWatchListFresh: the state at the initial-events-end bookmark of a
// watch-list must reflect every write that finished before the request.
func TestSemanticsWatchListFresh(t *testing.T) {
	e := startSem(t)
	ctx := ctxT(t)
	ns := e.namespace(t, ctx, "sem-wl")
	cms := e.Client.CoreV1().ConfigMaps(ns)
	stale := 0
	for i := 0; i < 50; i++ {
		name := fmt.Sprintf("x%d", i)
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		w, err := cms.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		state := map[string]bool{}
		var evs []string
		for {
			ev, ok := nextEvent(w, 5*time.Second)
			if !ok {
				t.Fatal("no bookmark")
			}
			o := ev.Object.(*corev1.ConfigMap)
			evs = append(evs, string(ev.Type)+" "+o.Name)
			if ev.Type == watch.Bookmark {
				break
			}
			state[o.Name] = ev.Type != watch.Deleted
		}
		w.Stop()
		for n, present := range state {
			if present {
				stale++
				t.Logf("iteration %d: state at the initial-events-end bookmark has deleted %s: %v", i, n, evs)
			}
		}
	}
	if stale > 0 {
		t.Errorf("%d of 50 watch-lists started right after a delete returned the deleted object at the bookmark", stale)
	}
}

// TestSemanticsApplyRecordsApplyOperation: server-side apply records managedFields
// entries with operation Apply, and a field an applier stops applying is removed
// when nobody else owns it.
func TestSemanticsApplyRecordsApplyOperation(t *testing.T) {
	e := startSem(t)
	ctx := ctxT(t)
	ns := e.namespace(t, ctx, "sem-ssa-op")
	cms := e.Client.CoreV1().ConfigMaps(ns)
	managers := func(cm *corev1.ConfigMap) string {
		var out []string
		for _, mf := range cm.ManagedFields {
			out = append(out, fmt.Sprintf("%s/%s", mf.Manager, mf.Operation))
		}
		sort.Strings(out)
		return fmt.Sprint(out)
	}
	cm, err := cms.Apply(ctx, corev1ac.ConfigMap("ssa", ns).WithData(map[string]string{"k": "a", "own": "a"}), metav1.ApplyOptions{FieldManager: "mgr-a"})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(cm); got != "[mgr-a/Apply]" {
		t.Errorf("managedFields after an apply that creates: %s, want [mgr-a/Apply]", got)
	}
	forced, err := cms.Apply(ctx, corev1ac.ConfigMap("ssa", ns).WithData(map[string]string{"k": "b"}), metav1.ApplyOptions{FieldManager: "mgr-b", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(forced); got != "[mgr-a/Apply mgr-b/Apply]" {
		t.Errorf("managedFields after a forced apply: %s, want [mgr-a/Apply mgr-b/Apply]", got)
	}
	after, err := cms.Apply(ctx, corev1ac.ConfigMap("ssa", ns), metav1.ApplyOptions{FieldManager: "mgr-a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := after.Data["own"]; ok || after.Data["k"] != "b" {
		t.Errorf("after mgr-a dropped data.own: data %v, want map[k:b]", after.Data)
	}
}

// TestSemanticsDeleteResponses: the DELETE response code and body, and the generation
// bump when an object is marked for deletion.
func TestSemanticsDeleteResponses(t *testing.T) {
	e := startSem(t)
	ctx := ctxT(t)
	ns := e.namespace(t, ctx, "sem-del")
	cms := e.Client.CoreV1().ConfigMaps(ns)
	base := "/api/v1/namespaces/" + ns
	hdr := map[string]string{"Accept": "application/json"}

	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "now"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resp, body := e.raw(t, ctx, "DELETE", base+"/configmaps/now", hdr, nil)
	var st metav1.Status
	_ = json.Unmarshal(body, &st)
	if resp.StatusCode != 200 || st.Kind != "Status" || st.Status != metav1.StatusSuccess || st.Details == nil ||
		st.Details.Name != "now" || st.Details.Kind != "configmaps" || st.Details.UID != created.UID {
		t.Errorf("immediate configmap delete: HTTP %d %s; want 200 and a Success Status with details name now, kind configmaps, uid %s", resp.StatusCode, body, created.UID)
	}
	for _, n := range []string{"fin", "fin2"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n, Finalizers: []string{"example.com/x"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	resp, body = e.raw(t, ctx, "DELETE", base+"/configmaps/fin", hdr, nil)
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"deletionTimestamp"`)) {
		t.Errorf("delete of an object with a finalizer: HTTP %d (want 200): %.200s", resp.StatusCode, body)
	}
	resp, body = e.raw(t, ctx, "DELETE", base+"/configmaps/fin2?orphanDependents=false", hdr, nil)
	if resp.StatusCode != 202 {
		t.Errorf("delete with orphanDependents=false of an object with a finalizer: HTTP %d (want 202): %.200s", resp.StatusCode, body)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: podTemplate("x").Spec}
	p.Spec.NodeName = "node-1"
	pod, err := e.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resp, body = e.raw(t, ctx, "DELETE", base+"/pods/p", hdr, nil)
	var marked corev1.Pod
	_ = json.Unmarshal(body, &marked)
	if resp.StatusCode != 200 || marked.DeletionTimestamp == nil {
		t.Errorf("graceful pod delete: HTTP %d (want 200 and the marked pod): %.200s", resp.StatusCode, body)
	}
	if marked.Generation != pod.Generation+1 {
		t.Errorf("graceful pod delete: generation %d→%d, want %d", pod.Generation, marked.Generation, pod.Generation+1)
	}
	d := deployment("d", 1)
	d.Finalizers = []string{"example.com/x"}
	if _, err := e.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.AppsV1().Deployments(ns).Delete(ctx, "d", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := e.Client.AppsV1().Deployments(ns).Get(ctx, "d", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.DeletionTimestamp == nil || got.Generation != 2 {
		t.Errorf("deployment marked for deletion: deletionTimestamp %v generation %d, want set and 2", got.DeletionTimestamp, got.Generation)
	}
	if err := e.Client.AppsV1().Deployments(ns).Delete(ctx, "d", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if again, err := e.Client.AppsV1().Deployments(ns).Get(ctx, "d", metav1.GetOptions{}); err != nil || again.Generation != got.Generation {
		t.Errorf("second delete: %v, generation %d→%d", err, got.Generation, again.Generation)
	}
}

// TestSemanticsWatchListOnQuietResource: a watch-list of a resource nobody writes
// must still end its initial events promptly although etcd's revision moved on
// because of other resources (the cache catches up through progress requests).
func TestSemanticsWatchListOnQuietResource(t *testing.T) {
	e := startSem(t)
	ctx := ctxT(t)
	ns := e.namespace(t, ctx, "sem-quiet")
	for i := 0; i < 5; i++ {
		if _, err := e.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("c", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	w, err := e.Client.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev, ok := nextEvent(w, 3*time.Second)
	if !ok || ev.Type != watch.Bookmark {
		t.Fatalf("want the initial-events-end bookmark, got %v %v after %v", ev.Type, ok, time.Since(start))
	}
}

// TestSemanticsUIDIsAPrecondition: a uid in a PUT body that differs from the stored one
// fails the precondition (409); in a PATCH it is an immutable field (422).
func TestSemanticsUIDIsAPrecondition(t *testing.T) {
	e := startSem(t)
	ctx := ctxT(t)
	ns := e.namespace(t, ctx, "sem-uid")
	cms := e.Client.CoreV1().ConfigMaps(ns)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "u"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.UID = "00000000-0000-0000-0000-000000000000"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("PUT with another uid: want 409, got %v", err)
	}
	patch := []byte(`{"metadata":{"uid":"00000000-0000-0000-0000-000000000000","labels":{"a":"b"}}}`)
	if _, err := cms.Patch(ctx, "u", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("PATCH with another uid: want 422, got %v", err)
	}
}
