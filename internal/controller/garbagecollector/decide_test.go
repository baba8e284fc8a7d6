package garbagecollector

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

func ref(name string, uid types.UID, block bool) metav1.OwnerReference {
	r := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: uid}
	if block {
		r.BlockOwnerDeletion = new(true)
	}
	return r
}

func obj(uid types.UID, deleting bool, finalizers ...string) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: uid, Finalizers: finalizers}}
	if deleting {
		o.DeletionTimestamp = new(metav1.Now())
	}
	return o
}

func TestClassifyOwner(t *testing.T) {
	r := ref("owner", "u1", true)
	for _, tc := range []struct {
		name string
		live metav1.Object
		want refClass
	}{
		{"absent", nil, refDangling},
		{"name reused by another object", obj("u2", false), refDangling},
		{"alive", obj("u1", false), refSolid},
		{"being deleted in the background", obj("u1", true), refSolid},
		{"being deleted with orphan", obj("u1", true, metav1.FinalizerOrphanDependents), refSolid},
		{"finalizer without deletion", obj("u1", false, metav1.FinalizerDeleteDependents), refSolid},
		{"waiting for dependents", obj("u1", true, "other", metav1.FinalizerDeleteDependents), refWaiting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classifyOwner(r, tc.live); got != tc.want {
				t.Errorf("classifyOwner = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	solid, dangling, waiting := ref("a", "ua", false), ref("b", "ub", false), ref("c", "uc", true)
	for _, tc := range []struct {
		name          string
		cls           classification
		finalizers    []string
		hasDependents bool
		depDeleting   bool
		want          decision
	}{
		{
			name: "a solid owner alone keeps the item",
			cls:  classification{solid: []metav1.OwnerReference{solid}},
			want: decision{kind: decideNothing},
		},
		{
			name: "a solid owner keeps the item; dangling and waiting references go",
			cls:  classification{solid: []metav1.OwnerReference{solid}, dangling: []metav1.OwnerReference{dangling}, waiting: []metav1.OwnerReference{waiting}},
			want: decision{kind: decideRemoveRefs, remove: []types.UID{"ub", "uc"}},
		},
		{
			name: "all owners dangling: background delete",
			cls:  classification{dangling: []metav1.OwnerReference{dangling}},
			want: decision{kind: decideDelete, policy: metav1.DeletePropagationBackground},
		},
		{
			name:       "all owners dangling, item has an orphan finalizer: honour it",
			cls:        classification{dangling: []metav1.OwnerReference{dangling}},
			finalizers: []string{metav1.FinalizerOrphanDependents},
			want:       decision{kind: decideDelete, policy: metav1.DeletePropagationOrphan},
		},
		{
			name:       "all owners dangling, item has a foreground finalizer: honour it",
			cls:        classification{dangling: []metav1.OwnerReference{dangling}},
			finalizers: []string{metav1.FinalizerDeleteDependents},
			want:       decision{kind: decideDelete, policy: metav1.DeletePropagationForeground},
		},
		{
			name: "owner waiting, item without dependents: background delete",
			cls:  classification{waiting: []metav1.OwnerReference{waiting}},
			want: decision{kind: decideDelete, policy: metav1.DeletePropagationBackground},
		},
		{
			name:          "owner waiting, item with dependents: foreground delete",
			cls:           classification{waiting: []metav1.OwnerReference{waiting}, dangling: []metav1.OwnerReference{dangling}},
			hasDependents: true,
			want:          decision{kind: decideDelete, policy: metav1.DeletePropagationForeground},
		},
		{
			name:          "owner waiting, a dependent also deleting its dependents: unblock first",
			cls:           classification{waiting: []metav1.OwnerReference{waiting}},
			hasDependents: true, depDeleting: true,
			want: decision{kind: decideDelete, policy: metav1.DeletePropagationForeground, unblock: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decide(tc.cls, tc.finalizers, tc.hasDependents, tc.depDeleting)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBlockingDependents(t *testing.T) {
	deps := []nodeView{
		{identity: objectReference{Name: "blocking"}, owners: []metav1.OwnerReference{ref("o", "owner", true)}},
		{identity: objectReference{Name: "nonblocking"}, owners: []metav1.OwnerReference{ref("o", "owner", false)}},
		{identity: objectReference{Name: "blocks-another"}, owners: []metav1.OwnerReference{ref("o", "owner", false), ref("x", "other", true)}},
		{identity: objectReference{Name: "explicit-false"}, owners: []metav1.OwnerReference{{UID: "owner", BlockOwnerDeletion: new(false)}}},
	}
	got := blockingDependents("owner", deps)
	if len(got) != 1 || got[0].identity.Name != "blocking" {
		t.Errorf("blockingDependents = %+v, want only the blocking one", got)
	}
}

func TestDeletionStartsWith(t *testing.T) {
	fg := metav1.FinalizerDeleteDependents
	for _, tc := range []struct {
		name     string
		old, cur metav1.Object
		want     bool
	}{
		{"add of an object being deleted", nil, obj("u", true, fg), true},
		{"add of a live object", nil, obj("u", false, fg), false},
		{"deletion starts", obj("u", false, fg), obj("u", true, fg), true},
		{"finalizer added while deleting", obj("u", true), obj("u", true, fg), true},
		{"already deleting", obj("u", true, fg), obj("u", true, fg), false},
		{"other finalizer", obj("u", false), obj("u", true, "x"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := deletionStartsWith(tc.old, tc.cur, fg); got != tc.want {
				t.Errorf("deletionStartsWith = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReferencesDiffAndUnblockedOwners(t *testing.T) {
	old := []metav1.OwnerReference{ref("a", "ua", true), ref("b", "ub", true), ref("c", "uc", false), ref("d", "ud", true)}
	cur := []metav1.OwnerReference{ref("b", "ub", false), ref("c", "uc", false), ref("d", "ud", true), ref("e", "ue", false)}
	added, removed, changed := referencesDiff(old, cur)
	if len(added) != 1 || added[0].UID != "ue" {
		t.Errorf("added = %v", added)
	}
	if len(removed) != 1 || removed[0].UID != "ua" {
		t.Errorf("removed = %v", removed)
	}
	if len(changed) != 1 || changed[0].cur.UID != "ub" {
		t.Errorf("changed = %v", changed)
	}
	if got := unblockedOwners(removed, changed); !slices.Equal(got, []types.UID{"ua", "ub"}) {
		t.Errorf("unblockedOwners = %v, want [ua ub]", got)
	}
}

func TestRelevantChange(t *testing.T) {
	base := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: "u", ResourceVersion: "1",
		OwnerReferences: []metav1.OwnerReference{ref("a", "ua", false)}}}
	labels := base.DeepCopy()
	labels.ResourceVersion, labels.Labels = "2", map[string]string{"x": "y"}
	if relevantChange(base, labels) {
		t.Errorf("a label change is not relevant")
	}
	refs := base.DeepCopy()
	refs.OwnerReferences[0].BlockOwnerDeletion = new(true)
	fin := base.DeepCopy()
	fin.Finalizers = []string{"f"}
	del := base.DeepCopy()
	del.DeletionTimestamp = new(metav1.Now())
	for name, o := range map[string]metav1.Object{"refs": refs, "finalizers": fin, "deletion": del} {
		if !relevantChange(base, o) {
			t.Errorf("a change of %s is relevant", name)
		}
	}
}

func TestPartitionAndAlternateIdentity(t *testing.T) {
	absent := objectReference{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "uo", Namespace: "ns"}
	match := &node{identity: objectReference{Name: "match", Namespace: "ns"},
		owners: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "uo"}}}
	otherKind := &node{identity: objectReference{Name: "kind", Namespace: "ns"},
		owners: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Secret", Name: "o", UID: "uo"}}}
	otherNS := &node{identity: objectReference{Name: "ns", Namespace: "elsewhere"},
		owners: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "uo"}}}
	deps := []*node{match, otherKind, otherNS}

	matching, nonmatching := partitionDependents(deps, absent)
	if len(matching) != 1 || matching[0] != match {
		t.Errorf("matching = %v", matching)
	}
	if len(nonmatching) != 2 {
		t.Errorf("nonmatching = %v", nonmatching)
	}
	// Alternates come in order after the absent identity (kind first), then wrap around:
	// the Secret, then the ConfigMap in "elsewhere".
	alt := alternateIdentity(nonmatching, absent)
	if alt == nil || alt.Kind != "Secret" {
		t.Fatalf("first alternate = %+v", alt)
	}
	next := alternateIdentity(nonmatching, *alt)
	if next == nil || next.Kind != "ConfigMap" || next.Namespace != "elsewhere" {
		t.Fatalf("second alternate = %+v", next)
	}
	if got := alternateIdentity([]*node{match}, absent); got != nil {
		t.Errorf("no alternate expected, got %+v", got)
	}
}

// applySMP applies a strategic merge patch to a ConfigMap, as the API server would.
func applySMP(t *testing.T, cm *corev1.ConfigMap, patch []byte) *corev1.ConfigMap {
	t.Helper()
	orig, err := json.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	out, err := strategicpatch.StrategicMergePatch(orig, patch, &corev1.ConfigMap{})
	if err != nil {
		t.Fatalf("apply %s: %v", patch, err)
	}
	var res corev1.ConfigMap
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	return &res
}

func TestPatches(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "d", UID: "ud", ResourceVersion: "7",
		OwnerReferences: []metav1.OwnerReference{ref("a", "ua", true), ref("b", "ub", false), ref("c", "uc", true)},
		Finalizers:      []string{"x", metav1.FinalizerDeleteDependents}}}

	p, err := deleteOwnerRefsPatch("ud", []types.UID{"ua", "uc"})
	if err != nil {
		t.Fatal(err)
	}
	const wantDelete = `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"ua"},{"$patch":"delete","uid":"uc"}],"uid":"ud"}}`
	if string(p) != wantDelete {
		t.Errorf("deleteOwnerRefsPatch = %s, want %s", p, wantDelete)
	}
	if got := applySMP(t, cm, p); len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != "ub" {
		t.Errorf("after deleting references: %v", got.OwnerReferences)
	}

	mp, err := deleteOwnerRefsMergePatch(cm, []types.UID{"ua", "uc"})
	if err != nil {
		t.Fatal(err)
	}
	const wantMerge = `{"metadata":{"resourceVersion":"7","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"b","uid":"ub"}]}}`
	if string(mp) != wantMerge {
		t.Errorf("deleteOwnerRefsMergePatch = %s, want %s", mp, wantMerge)
	}
	if mp, _ := deleteOwnerRefsMergePatch(cm, []types.UID{"ua", "ub", "uc"}); string(mp) != `{"metadata":{"resourceVersion":"7","ownerReferences":null}}` {
		t.Errorf("removing every reference: %s", mp)
	}

	up, err := unblockOwnerRefsPatch("ud", cm.OwnerReferences)
	if err != nil {
		t.Fatal(err)
	}
	got := applySMP(t, cm, up)
	if len(got.OwnerReferences) != 3 {
		t.Fatalf("unblock changed the reference count: %v", got.OwnerReferences)
	}
	for _, r := range got.OwnerReferences {
		if isBlocking(r) {
			t.Errorf("reference %s still blocks after unblock", r.UID)
		}
	}

	fp, err := removeFinalizerPatch("7", cm.Finalizers, metav1.FinalizerDeleteDependents)
	if err != nil {
		t.Fatal(err)
	}
	if string(fp) != `{"metadata":{"finalizers":["x"],"resourceVersion":"7"}}` {
		t.Errorf("removeFinalizerPatch = %s", fp)
	}
	if fp, _ := removeFinalizerPatch("7", []string{metav1.FinalizerOrphanDependents}, metav1.FinalizerOrphanDependents); string(fp) != `{"metadata":{"finalizers":null,"resourceVersion":"7"}}` {
		t.Errorf("removing the last finalizer: %s", fp)
	}
}
