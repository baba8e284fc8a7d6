package rootcacertpublisher

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/controller"
)

const testCA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

type fixture struct {
	t       *testing.T
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	pub     *Publisher
}

// newFixture builds a publisher over a fake clientset holding objs; the namespaces and
// config maps among them are also put in the (never started) informer caches.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{t: t, client: fake.NewSimpleClientset(objs...)}
	f.factory = informers.NewSharedInformerFactory(f.client, 0)
	p, err := New(controller.Deps{Client: f.client, Informers: f.factory, RootCA: []byte(testCA)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(p.queue.ShutDown)
	f.pub = p
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Namespace:
			err = f.factory.Core().V1().Namespaces().Informer().GetIndexer().Add(o)
		case *corev1.ConfigMap:
			err = f.factory.Core().V1().ConfigMaps().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// writes lists the client's write actions as "verb resource namespace".
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource+" "+a.GetNamespace())
	}
	return out
}

func configMap(ns string, data map[string]string, annotations map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ConfigMapName, Annotations: annotations}, Data: data}
}

func published(t *testing.T, f *fixture, ns string) *corev1.ConfigMap {
	t.Helper()
	cm, err := f.client.CoreV1().ConfigMaps(ns).Get(context.Background(), ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s/%s: %v", ns, ConfigMapName, err)
	}
	if cm.Data[DataKey] != testCA || len(cm.Data) != 1 {
		t.Errorf("data = %v, want only %s", cm.Data, DataKey)
	}
	if cm.Annotations[DescriptionAnnotation] != Description {
		t.Errorf("annotations = %v, want the description", cm.Annotations)
	}
	return cm
}

func TestNewNeedsRootCA(t *testing.T) {
	c := fake.NewSimpleClientset()
	if _, err := New(controller.Deps{Client: c, Informers: informers.NewSharedInformerFactory(c, 0)}); err == nil {
		t.Fatal("New without a root CA succeeded")
	}
}

func TestSync(t *testing.T) {
	good := map[string]string{DataKey: testCA}
	desc := map[string]string{DescriptionAnnotation: Description}
	cases := []struct {
		name   string
		cm     *corev1.ConfigMap
		writes []string
	}{
		{"missing: created", nil, []string{"create configmaps ns"}},
		{"as it must be: untouched", configMap("ns", good, desc), nil},
		{"data changed: rewritten", configMap("ns", map[string]string{DataKey: "tampered"}, desc), []string{"update configmaps ns"}},
		{"extra key: rewritten", configMap("ns", map[string]string{DataKey: testCA, "x": "y"}, desc), []string{"update configmaps ns"}},
		{"no description: annotated", configMap("ns", good, map[string]string{"mine": "kept"}), []string{"update configmaps ns"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}}
			if tc.cm != nil {
				objs = append(objs, tc.cm)
			}
			f := newFixture(t, objs...)
			if err := f.pub.Sync(context.Background(), "ns"); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if got := f.writes(); !slices.Equal(got, tc.writes) {
				t.Fatalf("writes = %v, want %v", got, tc.writes)
			}
			cm := published(t, f, "ns")
			if tc.cm != nil && tc.cm.Annotations["mine"] != "" && cm.Annotations["mine"] != "kept" {
				t.Errorf("a user's annotation was dropped: %v", cm.Annotations)
			}
		})
	}
}

// TestSyncCreateRefused: a namespace that is gone or terminating is no error (and
// so not retried); any other refusal is.
func TestSyncCreateRefused(t *testing.T) {
	terminating := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}}}}
	cases := []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"terminating", terminating, false},
		{"namespace gone", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns"), false},
		{"already exists", apierrors.NewAlreadyExists(schema.GroupResource{Resource: "configmaps"}, ConfigMapName), true},
		{"server error", apierrors.NewInternalError(errors.New("boom")), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.client.PrependReactor("create", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			err := f.pub.Sync(context.Background(), "ns")
			if (err != nil) != tc.wantErr {
				t.Fatalf("Sync = %v, want error: %v", err, tc.wantErr)
			}
		})
	}
}

// TestEvents checks which informer events queue a namespace.
func TestEvents(t *testing.T) {
	f := newFixture(t)
	p := f.pub
	active := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "active"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	term := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "term"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	p.namespaceAdded(term) // an add is queued whatever its phase, as upstream
	p.namespaceUpdated(active)
	p.namespaceUpdated(term) // not queued
	p.configMapChanged(configMap("cm-updated", nil, nil))
	p.configMapChanged(cache.DeletedFinalStateUnknown{Key: "cm-deleted/" + ConfigMapName, Obj: configMap("cm-deleted", nil, nil)})
	other := configMap("other", nil, nil)
	other.Name = "not-ours"
	p.configMapChanged(other) // not queued
	var got []string
	for p.queue.Len() > 0 {
		k, _ := p.queue.Get()
		got = append(got, k)
		p.queue.Done(k)
	}
	slices.Sort(got)
	if want := []string{"active", "cm-deleted", "cm-updated", "term"}; !slices.Equal(got, want) {
		t.Fatalf("queued %v, want %v", got, want)
	}
}
