package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

var widgetsV1 = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// servedWidgets creates the widget CRD (spec.size an integer defaulting to 1,
// spec.color a string, a status subresource and a scale subresource on
// spec.replicas) and waits until it is Established and discovery lists it.
func servedWidgets(t *testing.T, env *testenv.Env, ctx context.Context) dynamic.NamespaceableResourceInterface {
	t.Helper()
	ac, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	crd := widgetCRD(objectSchema(map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"size":     {Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte("1")}},
			"color":    {Type: "string"},
			"replicas": {Type: "integer"},
		}},
		"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"phase": {Type: "string"}, "replicas": {Type: "integer"},
		}},
	}))
	crd.Spec.Versions[0].Subresources.Scale = &apiextensionsv1.CustomResourceSubresourceScale{
		SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas",
	}
	crd.Spec.Versions[0].AdditionalPrinterColumns = []apiextensionsv1.CustomResourceColumnDefinition{
		{Name: "Color", Type: "string", JSONPath: ".spec.color"},
	}
	if _, err := ac.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	kc := kubernetes.NewForConfigOrDie(env.Config)
	poll.Until(t, "the CRD established and discovered", poll.Check(func() (bool, error) {
		got, err := ac.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				_, err := kc.Discovery().ServerResourcesForGroupVersion("example.com/v1")
				return err == nil, nil
			}
		}
		return false, nil
	}))
	return dynamic.NewForConfigOrDie(env.Config).Resource(widgetsV1)
}

func widget(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Widget")
	u.SetName(name)
	return u
}

// TestCustomResourcesServed: once its CRD is established, a custom resource is
// served with the dynamic client as upstream serves it: create applies schema
// defaults and prunes unknown fields (a warning; a 400 with fieldValidation=Strict),
// bad values are 422 with the schema's causes, the generation moves with the spec
// only, status and scale are subresources, watch sees the changes, and deleting the
// CRD deletes its objects and stops serving it.
func TestCustomResourcesServed(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := ctxT(t)
	res := servedWidgets(t, env, ctx)
	ws := res.Namespace("default")

	w, err := ws.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()

	created, err := ws.Create(ctx, widget("w1", map[string]any{"color": "red", "unknown": "x"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if size, _, _ := unstructured.NestedInt64(created.Object, "spec", "size"); size != 1 {
		t.Errorf("spec.size %v, want the default 1", created.Object["spec"])
	}
	if _, found, _ := unstructured.NestedString(created.Object, "spec", "unknown"); found {
		t.Errorf("spec.unknown kept: %v", created.Object["spec"])
	}
	if created.GetGeneration() != 1 || created.GetUID() == "" || created.GetResourceVersion() == "" {
		t.Errorf("metadata %+v", created.Object["metadata"])
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added || ev.Object.(*unstructured.Unstructured).GetName() != "w1" {
			t.Errorf("watch event %v %v", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event for the create")
	}

	_, err = ws.Create(ctx, widget("w2", map[string]any{"unknown": "x"}), metav1.CreateOptions{FieldValidation: "Strict"})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `strict decoding error: unknown field "spec.unknown"`) {
		t.Errorf("strict create: %v", err)
	}
	_, err = ws.Create(ctx, widget("w3", map[string]any{"size": "big"}), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.size") {
		t.Errorf("bad value: %v", err)
	}

	// The generation moves with the spec, not with metadata or the status.
	got, err := ws.Patch(ctx, "w1", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{})
	if err != nil || got.GetGeneration() != 1 {
		t.Fatalf("label patch: gen %d, %v", got.GetGeneration(), err)
	}
	got, err = ws.Patch(ctx, "w1", types.MergePatchType, []byte(`{"spec":{"color":"blue"}}`), metav1.PatchOptions{})
	if err != nil || got.GetGeneration() != 2 {
		t.Fatalf("spec patch: gen %d, %v", got.GetGeneration(), err)
	}
	_, err = ws.Patch(ctx, "w1", types.StrategicMergePatchType, []byte(`{"spec":{"color":"green"}}`), metav1.PatchOptions{})
	if !apierrors.IsUnsupportedMediaType(err) {
		t.Errorf("strategic merge patch: %v, want 415", err)
	}
	got.Object["status"] = map[string]any{"phase": "Ready", "replicas": int64(2)}
	got.Object["spec"].(map[string]any)["color"] = "ignored"
	st, err := ws.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if c, _, _ := unstructured.NestedString(st.Object, "spec", "color"); c != "blue" || st.GetGeneration() != 2 {
		t.Errorf("status update changed the spec: %v gen %d", st.Object["spec"], st.GetGeneration())
	}
	if p, _, _ := unstructured.NestedString(st.Object, "status", "phase"); p != "Ready" {
		t.Errorf("status %v", st.Object["status"])
	}
	// A status sent to the main resource is ignored.
	st.Object["status"] = map[string]any{"phase": "Gone"}
	upd, err := ws.Update(ctx, st, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if p, _, _ := unstructured.NestedString(upd.Object, "status", "phase"); p != "Ready" {
		t.Errorf("status through the main resource: %v", upd.Object["status"])
	}

	// Scale.
	scale, err := ws.Get(ctx, "w1", metav1.GetOptions{}, "scale")
	if err != nil {
		t.Fatalf("get scale: %v", err)
	}
	if r, _, _ := unstructured.NestedInt64(scale.Object, "status", "replicas"); r != 2 || scale.GetKind() != "Scale" {
		t.Errorf("scale %v", scale.Object)
	}
	if _, err := ws.Patch(ctx, "w1", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatalf("patch scale: %v", err)
	}
	got, err = ws.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 5 {
		t.Errorf("spec.replicas %v after scaling", got.Object["spec"])
	}

	// Server-side apply takes the schema's types.
	applied := widget("w4", map[string]any{"color": "pink"})
	got, err = ws.Apply(ctx, "w4", applied, metav1.ApplyOptions{FieldManager: "me"})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if len(got.GetManagedFields()) == 0 || got.GetManagedFields()[0].Manager != "me" {
		t.Errorf("managed fields %+v", got.GetManagedFields())
	}
	bad := widget("w5", map[string]any{"color": "pink"})
	bad.Object["unknownField"] = "x"
	_, err = ws.Apply(ctx, "w5", bad, metav1.ApplyOptions{FieldManager: "me"})
	if err == nil || !strings.Contains(err.Error(), ".unknownField: field not declared in schema") {
		t.Errorf("apply of an unknown field: %v", err)
	}

	// The schema is published in OpenAPI v3 and v2.
	kc := kubernetes.NewForConfigOrDie(env.Config)
	v3, err := kc.Discovery().RESTClient().Get().AbsPath("/openapi/v3/apis/example.com/v1").DoRaw(ctx)
	if err != nil || !strings.Contains(string(v3), `"com.example.v1.Widget"`) {
		t.Errorf("openapi v3 of example.com/v1: %v %.300s", err, v3)
	}
	v2, err := kc.Discovery().RESTClient().Get().AbsPath("/openapi/v2").DoRaw(ctx)
	if err != nil || !strings.Contains(string(v2), `"com.example.v1.Widget"`) {
		t.Errorf("openapi v2: %v", err)
	}
	var swagger spec.Swagger // what the conformance suite and kubectl decode it into
	if err := json.Unmarshal(v2, &swagger); err != nil {
		t.Errorf("openapi v2 does not decode as Swagger 2.0: %v", err)
	} else if _, ok := swagger.Definitions["com.example.v1.Widget"]; !ok {
		t.Errorf("openapi v2 has no definition of com.example.v1.Widget")
	}

	list, err := ws.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 || list.GetKind() != "WidgetList" {
		t.Fatalf("list: %v %v", list, err)
	}

	// Deleting the CRD deletes its objects, then the CRD, then stops serving. An
	// object's finalizer holds the CRD Terminating, when creates are refused.
	if _, err := ws.Patch(ctx, "w4", types.MergePatchType, []byte(`{"metadata":{"finalizers":["example.com/hold"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	ac := apiextensionsclient.NewForConfigOrDie(env.Config)
	if err := ac.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, "widgets.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete CRD: %v", err)
	}
	poll.Until(t, "creates refused while the CRD is terminating", func() error {
		_, err := ws.Create(ctx, widget("late", map[string]any{}), metav1.CreateOptions{})
		if apierrors.IsMethodNotSupported(err) && strings.Contains(err.Error(), "create not allowed while custom resource definition is terminating") {
			return nil
		}
		if err == nil {
			_ = ws.Delete(ctx, "late", metav1.DeleteOptions{})
		}
		return fmt.Errorf("create: %v", err)
	})
	if _, err := ws.Patch(ctx, "w4", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the CRD deleted", poll.True(func() bool {
		_, err := ac.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.example.com", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}))
	poll.Until(t, "widgets no longer served", poll.True(func() bool {
		_, err := ws.List(ctx, metav1.ListOptions{})
		return apierrors.IsNotFound(err)
	}))
}
