package crdserving

import (
	"context"
	"sync"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kubette/kubette/internal/registry"
)

// recorder is an Installer that records what it was asked.
type recorder struct {
	mu        sync.Mutex
	installed map[string]bool
}

func (r *recorder) InstallCustomResources(_ context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.installed[crd.Name] = true
	return nil
}

func (r *recorder) RemoveCustomResources(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.installed, name)
}

func crd(conds ...apiextensionsv1.CustomResourceDefinitionCondition) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: conds,
			AcceptedNames: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"}},
	}
}

func synced(t *testing.T, objs ...runtime.Object) (*fake.Clientset, apiextensionsinformers.SharedInformerFactory) {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	f := apiextensionsinformers.NewSharedInformerFactory(client, 0)
	f.Apiextensions().V1().CustomResourceDefinitions().Informer()
	return client, f
}

func start(t *testing.T, f apiextensionsinformers.SharedInformerFactory) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return ctx
}

// TestServingWaitsForAcceptedNames: a definition whose names are not accepted is not
// served; once they are, it is installed and marked Established as upstream words it.
func TestServingWaitsForAcceptedNames(t *testing.T) {
	pending := crd(apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionFalse})
	client, f := synced(t, pending)
	inst := &recorder{installed: map[string]bool{}}
	c, err := New(client, f, inst, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := start(t, f)
	if err := c.Sync(ctx, pending.Name); err != nil {
		t.Fatal(err)
	}
	if inst.installed[pending.Name] {
		t.Fatal("served before its names were accepted")
	}

	accepted := crd(apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue})
	if err := f.Apiextensions().V1().CustomResourceDefinitions().Informer().GetStore().Update(accepted); err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(ctx, accepted.Name); err != nil {
		t.Fatal(err)
	}
	if !inst.installed[accepted.Name] {
		t.Fatal("not served once its names were accepted")
	}
	got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, accepted.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	est := apihelpers.FindCRDCondition(got, apiextensionsv1.Established)
	if est == nil || est.Status != apiextensionsv1.ConditionTrue || est.Reason != "InitialNamesAccepted" || est.Message != "the initial names have been accepted" {
		t.Errorf("Established %+v", est)
	}

	// Gone: no longer served.
	if err := f.Apiextensions().V1().CustomResourceDefinitions().Informer().GetStore().Delete(accepted); err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(ctx, accepted.Name); err != nil {
		t.Fatal(err)
	}
	if inst.installed[accepted.Name] {
		t.Error("still served after its deletion")
	}
}

// TestFinalizerNeverEstablished: a deleted definition that was never established has
// no objects to delete: its finalizer goes at once, with upstream's condition.
func TestFinalizerNeverEstablished(t *testing.T) {
	now := metav1.Now()
	d := crd()
	d.DeletionTimestamp = &now
	d.Finalizers = []string{registry.CustomResourceCleanupFinalizer}
	client, f := synced(t, d)
	fin, err := NewFinalizer(client, dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), f, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := start(t, f)
	if err := fin.Sync(ctx, d.Name); err != nil {
		t.Fatal(err)
	}
	got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Finalizers) != 0 {
		t.Errorf("finalizers %v", got.Finalizers)
	}
	term := apihelpers.FindCRDCondition(got, apiextensionsv1.Terminating)
	if term == nil || term.Status != apiextensionsv1.ConditionFalse || term.Reason != "NeverEstablished" {
		t.Errorf("Terminating %+v", term)
	}
}
