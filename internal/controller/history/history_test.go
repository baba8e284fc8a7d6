package history

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

var dsKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

func TestSnapshot(t *testing.T) {
	ctx := context.Background()
	parent := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "ns", UID: "u", Annotations: map[string]string{"note": "x"}}}
	cs := fake.NewClientset()
	c := Client{Client: cs}
	var count int32
	labels := map[string]string{"app": "agent"}

	// No revision yet: revision 1 is made, named after its hash, with the parent's annotations.
	r1, _, err := c.Snapshot(ctx, parent, nil, New(parent, dsKind, labels, []byte(`{"v":1}`), 1, &count), &count)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Revision != 1 || r1.Name != "agent-"+r1.Labels[HashLabel] || r1.Labels["app"] != "agent" || r1.Annotations["note"] != "x" {
		t.Fatalf("first revision %+v", r1.ObjectMeta)
	}
	if ref := metav1.GetControllerOf(r1); ref == nil || ref.UID != "u" {
		t.Fatalf("owner %+v", r1.OwnerReferences)
	}
	// Another template: revision 2.
	revs := []*appsv1.ControllerRevision{r1}
	r2, _, err := c.Snapshot(ctx, parent, revs, New(parent, dsKind, labels, []byte(`{"v":2}`), Next(revs), &count), &count)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Revision != 2 || r2.Name == r1.Name {
		t.Fatalf("second revision %s %d", r2.Name, r2.Revision)
	}
	// The latest template again: nothing changes.
	revs = append(revs, r2)
	same, _, err := c.Snapshot(ctx, parent, revs, New(parent, dsKind, labels, []byte(`{"v":2}`), Next(revs), &count), &count)
	if err != nil || same.Name != r2.Name || same.Revision != 2 {
		t.Fatalf("same template: %v %s %d", err, same.Name, same.Revision)
	}
	// The first template again: revision 1 comes back as revision 3.
	back, _, err := c.Snapshot(ctx, parent, revs, New(parent, dsKind, labels, []byte(`{"v":1}`), Next(revs), &count), &count)
	if err != nil || back.Name != r1.Name || back.Revision != 3 {
		t.Fatalf("rollback: %v %s %d", err, back.Name, back.Revision)
	}
	if count != 0 {
		t.Errorf("collision count %d", count)
	}
}

// TestCreateCollision moves the collision count on when the name is taken by other data.
func TestCreateCollision(t *testing.T) {
	ctx := context.Background()
	parent := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "ns", UID: "u"}}
	var count int32
	want := New(parent, dsKind, nil, []byte(`{"v":1}`), 1, &count)
	squatter := want.DeepCopy()
	squatter.Data.Raw = []byte(`{"other":true}`)
	cs := fake.NewClientset(squatter)
	got, err := Client{Client: cs}.Create(ctx, parent, want, &count)
	if err != nil {
		t.Fatal(err)
	}
	if count != 1 || got.Name == squatter.Name || got.Labels[HashLabel] != Hash(want, &count) {
		t.Errorf("count %d, name %s", count, got.Name)
	}
}
