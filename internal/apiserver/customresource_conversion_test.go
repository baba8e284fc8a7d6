package apiserver_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/kubette/kubette/internal/pki"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// converter is a conversion webhook over TLS on loopback: v1 widgets have
// spec.hostPort "h:p", v2 ones spec.host and spec.port.
type converter struct {
	url   string
	ca    []byte
	calls atomic.Int32
	down  atomic.Bool
}

func startConverter(t *testing.T) *converter {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "conversion-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(pki.CertSpec{CommonName: "converter", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	c := &converter{url: "https://" + ln.Addr().String() + "/convert", ca: ca.CertPEM}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.calls.Add(1)
		var review apiextensionsv1.ConversionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
		if c.down.Load() {
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: "the converter is down"}
		}
		for _, raw := range review.Request.Objects {
			var u unstructured.Unstructured
			_ = u.UnmarshalJSON(raw.Raw)
			if spec, ok := u.Object["spec"].(map[string]any); ok {
				convertHostPort(spec, review.Request.DesiredAPIVersion)
			}
			convertHostPort(u.Object, review.Request.DesiredAPIVersion) // as upstream's sample converter
			u.SetAPIVersion(review.Request.DesiredAPIVersion)
			u.SetLabels(map[string]string{"converted": "yes"})
			u.SetUID(types.UID("changed-by-the-webhook")) // must not stick
			data, _ := u.MarshalJSON()
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: data})
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(&review)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return c
}

// convertHostPort converts m's fields between v1 (hostPort "h:p") and v2 (host, port).
func convertHostPort(m map[string]any, desired string) {
	switch desired {
	case "example.com/v2":
		if hp, ok := m["hostPort"].(string); ok {
			h, p, _ := strings.Cut(hp, ":")
			delete(m, "hostPort")
			m["host"], m["port"] = h, p
		}
	case "example.com/v1":
		if h, ok := m["host"].(string); ok {
			m["hostPort"] = h + ":" + m["port"].(string)
			delete(m, "host")
			delete(m, "port")
		}
	}
}

// TestCustomResourceConversionWebhook: a CRD whose versions are converted by a
// webhook serves each object in the version asked for (get, list of objects stored
// in either version, watch), keeps the metadata but labels and annotations as
// stored, and answers 500 naming the webhook when the conversion fails.
func TestCustomResourceConversionWebhook(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	conv := startConverter(t)
	yes := true
	open := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", XPreserveUnknownFields: &yes}}}}
	crd := widgetCRD(nil)
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{
		{Name: "v1", Served: true, Storage: true, Schema: open},
		{Name: "v2", Served: true, Schema: open},
	}
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &conv.url, CABundle: conv.ca}}}
	ac := apiextensionsclient.NewForConfigOrDie(env.Config)
	if _, err := ac.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	v1 := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Namespace("default")
	v2 := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}).Namespace("default")
	w := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"hostPort": "web:80"}}}
	w.SetAPIVersion("example.com/v1")
	w.SetKind("Widget")
	w.SetName("a")
	var created *unstructured.Unstructured
	poll.Until(t, "v1 served", func() error {
		var err error
		created, err = v1.Create(ctx, w, metav1.CreateOptions{})
		return err
	})
	if conv.calls.Load() != 0 {
		t.Errorf("a v1 object written in v1 went to the webhook %d times", conv.calls.Load())
	}
	got, err := v2.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if spec := got.Object["spec"].(map[string]any); spec["host"] != "web" || spec["port"] != "80" || got.GetAPIVersion() != "example.com/v2" {
		t.Errorf("v2 view: %v", got.Object)
	}
	if got.GetUID() != created.GetUID() || got.GetLabels()["converted"] != "yes" {
		t.Errorf("metadata after conversion: uid %s labels %v", got.GetUID(), got.GetLabels())
	}

	// An object written in v2 is stored in v1 (the storage version) through the webhook.
	w2 := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"host": "db", "port": "5432"}}}
	w2.SetAPIVersion("example.com/v2")
	w2.SetKind("Widget")
	w2.SetName("b")
	if _, err := v2.Create(ctx, w2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, err := v1.Get(ctx, "b", metav1.GetOptions{}); err != nil || b.Object["spec"].(map[string]any)["hostPort"] != "db:5432" {
		t.Errorf("v1 view of a v2 write: %v %v", b, err)
	}
	list, err := v2.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("v2 list: %v %v", list, err)
	}
	for _, it := range list.Items {
		if it.GetAPIVersion() != "example.com/v2" || it.Object["spec"].(map[string]any)["host"] == nil {
			t.Errorf("v2 list item %v", it.Object)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	watcher, err := v2.Watch(wctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v1.Patch(ctx, "a", types.MergePatchType, []byte(`{"spec":{"hostPort":"web:8080"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := <-watcher.ResultChan()
	if u, ok := ev.Object.(*unstructured.Unstructured); !ok || u.Object["spec"].(map[string]any)["port"] != "8080" {
		t.Errorf("v2 watch event %v %v", ev.Type, ev.Object)
	}
	watcher.Stop()

	// A failed conversion is a 500 naming the webhook.
	conv.down.Store(true)
	_, err = v2.Get(ctx, "a", metav1.GetOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "conversion webhook for example.com/v1, Kind=Widget failed") ||
		!strings.Contains(err.Error(), "the converter is down") {
		t.Errorf("failed conversion: %v", err)
	}
}

// TestCustomResourceConversionMixedList: after the storage version moves from v1 to
// v2, a list holds objects stored in both; read in either version, every item comes
// back in that version (as upstream's "non homogeneous list" conformance test).
func TestCustomResourceConversionMixedList(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	conv := startConverter(t)
	schemaOf := func(fields ...string) *apiextensionsv1.CustomResourceValidation {
		props := map[string]apiextensionsv1.JSONSchemaProps{}
		for _, f := range fields {
			props[f] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}}
	}
	crd := widgetCRD(nil)
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{
		{Name: "v1", Served: true, Storage: true, Schema: schemaOf("hostPort")},
		{Name: "v2", Served: true, Schema: schemaOf("host", "port")},
	}
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &conv.url, CABundle: conv.ca}}}
	ac := apiextensionsclient.NewForConfigOrDie(env.Config)
	if _, err := ac.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	v1 := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Namespace("default")
	v2 := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}).Namespace("default")
	widget := func(name string) *unstructured.Unstructured {
		w := &unstructured.Unstructured{Object: map[string]any{"hostPort": "web:80"}}
		w.SetAPIVersion("example.com/v1")
		w.SetKind("Widget")
		w.SetName(name)
		return w
	}
	poll.Until(t, "v1 served", func() error {
		_, err := v1.Create(ctx, widget("one"), metav1.CreateOptions{})
		return err
	})
	// The CRD controllers write its status meanwhile: get and update until no conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := ac.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Versions[0].Storage, cur.Spec.Versions[1].Storage = false, true
		_, err = ac.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// As the conformance test, the second object is written right after the update.
	poll.Until(t, "the second object created", func() error {
		_, err := v1.Create(ctx, widget("two"), metav1.CreateOptions{})
		return err
	})
	for _, tc := range []struct {
		client  dynamic.ResourceInterface
		version string
		check   func(obj map[string]any) bool
	}{
		{v1, "example.com/v1", func(s map[string]any) bool { return s["hostPort"] == "web:80" && s["host"] == nil }},
		{v2, "example.com/v2", func(s map[string]any) bool { return s["host"] == "web" && s["port"] == "80" && s["hostPort"] == nil }},
		{v1, "example.com/v1", func(s map[string]any) bool { return s["hostPort"] == "web:80" && s["host"] == nil }},
	} {
		list, err := tc.client.List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 2 {
			t.Fatalf("%s list: %v %v", tc.version, list, err)
		}
		for _, it := range list.Items {
			if it.GetAPIVersion() != tc.version || !tc.check(it.Object) {
				t.Errorf("%s list item %s: %v", tc.version, it.GetName(), it.Object)
			}
		}
	}
}
