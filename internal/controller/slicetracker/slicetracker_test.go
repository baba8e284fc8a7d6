package slicetracker

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func slice(name, uid, rv string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), ResourceVersion: rv,
		Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}}
}

var web = types.NamespacedName{Namespace: "ns", Name: "web"}

func TestOwnWritesAndStaleCache(t *testing.T) {
	tr := New()
	written := slice("web-a", "a", "10")
	if !tr.ShouldSync(written) || tr.Has(written) {
		t.Fatal("an untracked slice must sync and not be tracked")
	}
	tr.Update(written)
	if tr.ShouldSync(written) || !tr.Has(written) {
		t.Error("the controller's own write would trigger a sync")
	}
	if !tr.Stale(web, nil) {
		t.Error("a cache without the slice just written is not stale")
	}
	if !tr.Stale(web, []*discoveryv1.EndpointSlice{slice("web-a", "a", "9")}) {
		t.Error("a cache with an older state of the slice is not stale")
	}
	if tr.Stale(web, []*discoveryv1.EndpointSlice{written}) {
		t.Error("a cache with the written state is stale")
	}
	if !tr.ShouldSync(slice("web-a", "a", "11")) {
		t.Error("a newer, foreign change would not trigger a sync")
	}
	tr.DeleteService("ns", "web")
	if tr.Has(written) || tr.Stale(web, nil) {
		t.Error("a forgotten Service is still tracked")
	}
}

func TestDeletedSliceTracking(t *testing.T) {
	s := slice("web-a", "a", "10")
	tr := New()
	tr.ExpectDeletion(s)
	if !tr.Stale(web, []*discoveryv1.EndpointSlice{s}) {
		t.Error("a slice the controller deleted is still cached but not stale")
	}
	if tr.HandleDeletion(s) {
		t.Error("own deletion would trigger a sync")
	}
	if tr.Stale(web, nil) {
		t.Error("stale after the deletion was seen")
	}
	if !tr.HandleDeletion(s) {
		t.Error("a foreign deletion would not trigger a sync")
	}
}
