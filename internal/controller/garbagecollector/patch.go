package garbagecollector

import (
	"encoding/json"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Patch bodies the garbage collector sends. Strategic merge patches carry the target's own
// UID: should the name have been reused by another object, the server refuses to change
// the UID and the patch fails instead of touching the wrong object. JSON merge patches (for
// resources without strategic merge support) carry the resourceVersion instead.

// deleteOwnerRefsPatch is a strategic merge patch removing the owner references with the
// given UIDs from the object with UID dependent.
func deleteOwnerRefsPatch(dependent types.UID, owners []types.UID) ([]byte, error) {
	refs := make([]map[string]string, 0, len(owners))
	for _, u := range owners {
		refs = append(refs, map[string]string{"$patch": "delete", "uid": string(u)})
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": dependent, "ownerReferences": refs},
	})
}

// metadataMergePatch is the JSON merge patch of a resourceVersion-guarded metadata change.
type metadataMergePatch struct {
	Metadata struct {
		ResourceVersion string                  `json:"resourceVersion"`
		OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
	} `json:"metadata"`
}

// deleteOwnerRefsMergePatch is the JSON merge patch equivalent of deleteOwnerRefsPatch,
// computed from the object's current metadata.
func deleteOwnerRefsMergePatch(cur metav1.Object, owners []types.UID) ([]byte, error) {
	var p metadataMergePatch
	p.Metadata.ResourceVersion = cur.GetResourceVersion()
	for _, r := range cur.GetOwnerReferences() {
		if !slices.Contains(owners, r.UID) {
			p.Metadata.OwnerReferences = append(p.Metadata.OwnerReferences, r)
		}
	}
	return json.Marshal(p)
}

// unblockOwnerRefsPatch is a strategic merge patch setting blockOwnerDeletion to false on
// every blocking reference in refs of the object with UID uid.
func unblockOwnerRefsPatch(uid types.UID, refs []metav1.OwnerReference) ([]byte, error) {
	var blocking []metav1.OwnerReference
	for _, r := range refs {
		if isBlocking(r) {
			r.BlockOwnerDeletion = new(false)
			blocking = append(blocking, r)
		}
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": uid, "ownerReferences": blocking},
	})
}

// unblockOwnerRefsMergePatch is the JSON merge patch equivalent of unblockOwnerRefsPatch.
func unblockOwnerRefsMergePatch(cur metav1.Object) ([]byte, error) {
	var p metadataMergePatch
	p.Metadata.ResourceVersion = cur.GetResourceVersion()
	for _, r := range cur.GetOwnerReferences() {
		r.BlockOwnerDeletion = new(false)
		p.Metadata.OwnerReferences = append(p.Metadata.OwnerReferences, r)
	}
	return json.Marshal(p)
}

// removeFinalizerPatch is a JSON merge patch setting the finalizers of the object at
// resourceVersion rv to finalizers minus f (null when none remain).
func removeFinalizerPatch(rv string, finalizers []string, f string) ([]byte, error) {
	var rest []string
	for _, x := range finalizers {
		if x != f {
			rest = append(rest, x)
		}
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": rv, "finalizers": rest},
	})
}
