package apiservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationlisters "k8s.io/kube-aggregator/pkg/client/listers/apiregistration/v1"
)

// fakeAuto records what the local controller asks upstream's autoregister controller.
type fakeAuto struct{ calls []string }

func (f *fakeAuto) AddAPIServiceToSyncOnStart(in *apiregistrationv1.APIService) {
	call := "onstart " + in.Name
	if in.Spec.Service != nil {
		call += " " + in.Spec.Service.Namespace + "/" + in.Spec.Service.Name
	}
	f.calls = append(f.calls, call)
}

func (f *fakeAuto) AddAPIServiceToSync(in *apiregistrationv1.APIService) {
	f.calls = append(f.calls, "sync "+in.Name+" "+priorityString(in))
}
func (f *fakeAuto) RemoveAPIServiceToSync(name string) { f.calls = append(f.calls, "remove "+name) }
func (f *fakeAuto) Run(int, <-chan struct{})           {}
func priorityString(s *apiregistrationv1.APIService) string {
	return fmt.Sprintf("%d/%d", s.Spec.GroupPriorityMinimum, s.Spec.VersionPriority)
}

func crd(group string, versions map[string]bool) *apiextensionsv1.CustomResourceDefinition {
	c := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "things." + group}, Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group}}
	for v, served := range versions {
		c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: served})
	}
	return c
}

// TestLocalSync: a served version of a definition keeps its APIService (priorities
// 1000/100), an unserved or vanished one is removed.
func TestLocalSync(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := idx.Add(crd("example.com", map[string]bool{"v1": true, "v2": false})); err != nil {
		t.Fatal(err)
	}
	auto := &fakeAuto{}
	c := &Local{auto: auto, crds: apiextensionslisters.NewCustomResourceDefinitionLister(idx)}
	for _, key := range []string{"example.com/v1", "example.com/v2", "other.com/v1"} {
		if err := c.Sync(context.Background(), key); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"sync v1.example.com 1000/100", "remove v2.example.com", "remove v1.other.com"}
	if !reflect.DeepEqual(auto.calls, want) {
		t.Errorf("calls %q, want %q", auto.calls, want)
	}
}

// TestBuiltinAPIService: upstream's priorities, and none for a group-version upstream
// does not list.
func TestBuiltinAPIService(t *testing.T) {
	core := BuiltinAPIService(schema.GroupVersion{Version: "v1"})
	if core == nil || core.Name != "v1." || core.Spec.GroupPriorityMinimum != 18000 || core.Spec.VersionPriority != 1 {
		t.Errorf("v1. = %+v", core)
	}
	if s := BuiltinAPIService(schema.GroupVersion{Group: "autoscaling", Version: "v2"}); s == nil || s.Spec.VersionPriority != 30 {
		t.Errorf("v2.autoscaling = %+v", s)
	}
	if s := BuiltinAPIService(schema.GroupVersion{Group: "example.com", Version: "v1"}); s != nil {
		t.Errorf("v1.example.com = %+v, want none", s)
	}
}

// fakeHandlers records what the registrar tells the server.
type fakeHandlers struct {
	calls []string
	err   error
}

func (f *fakeHandlers) AddAPIService(s *apiregistrationv1.APIService) error {
	f.calls = append(f.calls, "add "+s.Name)
	return f.err
}
func (f *fakeHandlers) RemoveAPIService(name string) { f.calls = append(f.calls, "remove "+name) }

// TestRegistrarSync: an APIService in the cache is added (its error returned for a
// retry), a gone one removed.
func TestRegistrarSync(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := idx.Add(&apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1.wardle.example.com"}}); err != nil {
		t.Fatal(err)
	}
	h := &fakeHandlers{}
	c := &Registrar{handlers: h, lister: apiregistrationlisters.NewAPIServiceLister(idx)}
	if err := c.Sync(context.Background(), "v1.wardle.example.com"); err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(context.Background(), "v1.gone.example.com"); err != nil {
		t.Fatal(err)
	}
	h.err = errors.New("no aggregation")
	if err := c.Sync(context.Background(), "v1.wardle.example.com"); !errors.Is(err, h.err) {
		t.Errorf("sync: %v, want the server's error", err)
	}
	want := []string{"add v1.wardle.example.com", "remove v1.gone.example.com", "add v1.wardle.example.com"}
	if !reflect.DeepEqual(h.calls, want) {
		t.Errorf("calls %q, want %q", h.calls, want)
	}
}

// TestReplaceableLocal: the metrics.k8s.io APIService is made local at start unless a
// user's APIService of that name points at a Service (metrics-server installed), whose
// spec is then what autoregister keeps; the other built-in ones are always local.
func TestReplaceableLocal(t *testing.T) {
	metrics := schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1beta1"}
	if !ReplaceableByExtension(metrics) || ReplaceableByExtension(schema.GroupVersion{Group: "apps", Version: "v1"}) {
		t.Fatal("only metrics.k8s.io/v1beta1 is replaceable")
	}
	if s := BuiltinAPIService(metrics); s == nil || priorityString(s) != "100/100" {
		t.Fatalf("v1beta1.metrics.k8s.io = %+v, want metrics-server's 100/100", s)
	}
	for name, cur := range map[string]*apiregistrationv1.APIService{
		"missing": nil,
		"local":   {ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"}},
		"user's": {ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"}, Spec: apiregistrationv1.APIServiceSpec{
			Service: &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server"}}},
	} {
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		if cur != nil {
			if err := idx.Add(cur); err != nil {
				t.Fatal(err)
			}
		}
		auto := &fakeAuto{}
		c := &Local{auto: auto, apiServices: apiregistrationlisters.NewAPIServiceLister(idx), log: slog.New(slog.DiscardHandler)}
		for _, gv := range []schema.GroupVersion{{Group: "apps", Version: "v1"}, metrics} {
			s := BuiltinAPIService(gv)
			if ReplaceableByExtension(gv) {
				c.replaceable = append(c.replaceable, s)
			} else {
				auto.AddAPIServiceToSyncOnStart(s)
			}
		}
		c.registerReplaceable()
		want := []string{"onstart v1.apps", "onstart v1beta1.metrics.k8s.io"}
		if name == "user's" {
			want[1] += " kube-system/metrics-server" // the user's spec: nothing to change
		}
		if !reflect.DeepEqual(auto.calls, want) {
			t.Errorf("%s: calls %q, want %q", name, auto.calls, want)
		}
	}
}
