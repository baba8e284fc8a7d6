package ownerref

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var rsKind = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}

func owner(deleting bool) *metav1.ObjectMeta {
	o := &metav1.ObjectMeta{Name: "rs", Namespace: "ns", UID: "owner-uid"}
	if deleting {
		now := metav1.Now()
		o.DeletionTimestamp = &now
	}
	return o
}

func pod(name string, lbls map[string]string, controllerUID types.UID) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), Labels: lbls}}
	if controllerUID != "" {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x", UID: controllerUID, Controller: &yes}}
	}
	return p
}

func TestNewControllerRef(t *testing.T) {
	ref := NewControllerRef(owner(false), rsKind)
	if ref.APIVersion != "apps/v1" || ref.Kind != "ReplicaSet" || ref.Name != "rs" || ref.UID != "owner-uid" ||
		ref.Controller == nil || !*ref.Controller || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("NewControllerRef = %+v", ref)
	}
}

func TestPatches(t *testing.T) {
	got := string(AdoptPatch(owner(false), rsKind, "pod-uid"))
	want := `{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"owner-uid","controller":true,"blockOwnerDeletion":true}],"uid":"pod-uid"}}`
	if got != want {
		t.Errorf("AdoptPatch =\n%s\nwant\n%s", got, want)
	}
	got = string(ReleasePatch("owner-uid", "pod-uid"))
	want = `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"owner-uid"}],"uid":"pod-uid"}}`
	if got != want {
		t.Errorf("ReleasePatch =\n%s\nwant\n%s", got, want)
	}
}

type recorder struct {
	adopted, released []string
	canAdoptCalls     int
	adoptErr          map[string]error
	releaseErr        map[string]error
	canAdoptErr       error
}

func (r *recorder) claim(t *testing.T, o metav1.Object, pods ...*corev1.Pod) ([]string, error) {
	t.Helper()
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	claimed, err := Claim(context.Background(), o, rsKind, sel, pods,
		func(_ context.Context, p *corev1.Pod) error {
			r.adopted = append(r.adopted, p.Name)
			return r.adoptErr[p.Name]
		},
		func(_ context.Context, p *corev1.Pod) error {
			r.released = append(r.released, p.Name)
			return r.releaseErr[p.Name]
		},
		func(context.Context) error {
			r.canAdoptCalls++
			return r.canAdoptErr
		})
	var names []string
	for _, p := range claimed {
		names = append(names, p.Name)
	}
	return names, err
}

func TestClaim(t *testing.T) {
	web := map[string]string{"app": "web"}
	db := map[string]string{"app": "db"}
	deleting := pod("orphan-deleting", web, "")
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	pods := []*corev1.Pod{
		pod("owned-match", web, "owner-uid"),
		pod("owned-nomatch", db, "owner-uid"),
		pod("other-match", web, "other-uid"),
		pod("orphan-match", web, ""),
		pod("orphan-nomatch", db, ""),
		deleting,
		pod("orphan-match-2", web, ""),
	}

	t.Run("live owner", func(t *testing.T) {
		r := &recorder{}
		got, err := r.claim(t, owner(false), pods...)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"owned-match", "orphan-match", "orphan-match-2"}; !slices.Equal(got, want) {
			t.Errorf("claimed %v, want %v", got, want)
		}
		if want := []string{"orphan-match", "orphan-match-2"}; !slices.Equal(r.adopted, want) {
			t.Errorf("adopted %v, want %v", r.adopted, want)
		}
		if want := []string{"owned-nomatch"}; !slices.Equal(r.released, want) {
			t.Errorf("released %v, want %v", r.released, want)
		}
		if r.canAdoptCalls != 1 {
			t.Errorf("canAdopt called %d times, want 1", r.canAdoptCalls)
		}
	})

	t.Run("owner being deleted", func(t *testing.T) {
		r := &recorder{}
		got, err := r.claim(t, owner(true), pods...)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"owned-match"}; !slices.Equal(got, want) {
			t.Errorf("claimed %v, want %v", got, want)
		}
		if len(r.adopted)+len(r.released)+r.canAdoptCalls != 0 {
			t.Errorf("adopted %v released %v canAdopt %d; want nothing", r.adopted, r.released, r.canAdoptCalls)
		}
	})

	t.Run("canAdopt fails", func(t *testing.T) {
		r := &recorder{canAdoptErr: errors.New("owner gone")}
		got, err := r.claim(t, owner(false), pods...)
		if err == nil {
			t.Fatal("no error")
		}
		if want := []string{"owned-match"}; !slices.Equal(got, want) {
			t.Errorf("claimed %v, want %v", got, want)
		}
		if len(r.adopted) != 0 || r.canAdoptCalls != 1 {
			t.Errorf("adopted %v with %d canAdopt calls", r.adopted, r.canAdoptCalls)
		}
	})

	t.Run("adopt and release errors", func(t *testing.T) {
		gr := schema.GroupResource{Resource: "pods"}
		r := &recorder{
			adoptErr: map[string]error{
				"orphan-match":   apierrors.NewNotFound(gr, "orphan-match"),
				"orphan-match-2": apierrors.NewConflict(gr, "orphan-match-2", errors.New("uid")),
			},
			releaseErr: map[string]error{"owned-nomatch": errors.New("boom")},
		}
		got, err := r.claim(t, owner(false), pods...)
		if want := []string{"owned-match"}; !slices.Equal(got, want) {
			t.Errorf("claimed %v, want %v", got, want)
		}
		if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "boom") {
			t.Errorf("err = %v, want the release error and the conflict", err)
		}
	})

	t.Run("release of a gone object is done", func(t *testing.T) {
		r := &recorder{releaseErr: map[string]error{"owned-nomatch": apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "x")}}
		if _, err := r.claim(t, owner(false), pods[1]); err != nil {
			t.Errorf("err = %v", err)
		}
	})
}

func TestRecheckOwner(t *testing.T) {
	o := owner(false)
	ctx := context.Background()
	if err := RecheckOwner(o, func(context.Context) (metav1.Object, error) { return owner(false), nil })(ctx); err != nil {
		t.Errorf("same owner: %v", err)
	}
	if err := RecheckOwner(o, func(context.Context) (metav1.Object, error) { return owner(true), nil })(ctx); err == nil {
		t.Error("deleting owner: no error")
	}
	replaced := owner(false)
	replaced.UID = "new"
	if err := RecheckOwner(o, func(context.Context) (metav1.Object, error) { return replaced, nil })(ctx); err == nil {
		t.Error("replaced owner: no error")
	}
	gone := errors.New("not found")
	if err := RecheckOwner(o, func(context.Context) (metav1.Object, error) { return nil, gone })(ctx); !errors.Is(err, gone) {
		t.Errorf("get error: %v", err)
	}
}
