package volumebinding

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

func withVersion(pv *corev1.PersistentVolume, rv string) *corev1.PersistentVolume {
	pv.ResourceVersion = rv
	return pv
}

func TestAssumeCache(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	c := newAssumeCache[*corev1.PersistentVolume]("v1.PersistentVolume", store)
	if err := c.assume(withVersion(volume("a", "", "1Gi", ""), "5")); err == nil || err.Error() != `could not find v1.PersistentVolume "a"` {
		t.Errorf("assume of a missing object: %v", err)
	}
	_ = store.Add(withVersion(volume("a", "", "1Gi", ""), "5"))
	assumed := withVersion(volume("a", "assumed", "1Gi", ""), "5")
	if err := c.assume(assumed); err != nil {
		t.Fatal(err)
	}
	// Reads see the assumed object, the API view the informer's.
	if got, _ := c.get("a"); got.Spec.StorageClassName != "assumed" {
		t.Errorf("get: class %q", got.Spec.StorageClassName)
	}
	if got, _ := c.getAPI("a"); got.Spec.StorageClassName != "" {
		t.Errorf("getAPI: class %q", got.Spec.StorageClassName)
	}
	if l := c.list(func(pv *corev1.PersistentVolume) bool { return pv.Spec.StorageClassName == "assumed" }); len(l) != 1 {
		t.Errorf("list: %d", len(l))
	}
	// An older object is refused.
	if err := c.assume(withVersion(volume("a", "old", "1Gi", ""), "4")); err == nil || err.Error() != `v1.PersistentVolume "a" is out of sync (stored: 5, assume: 4)` {
		t.Errorf("assume of an older object: %v", err)
	}
	// The same version from the informer (a resync) keeps the assumed one; a newer one wins.
	c.observe(withVersion(volume("a", "", "1Gi", ""), "5"), false)
	if got, _ := c.get("a"); got.Spec.StorageClassName != "assumed" {
		t.Errorf("after a resync: class %q", got.Spec.StorageClassName)
	}
	newer := withVersion(volume("a", "written", "1Gi", ""), "6")
	_ = store.Update(newer)
	if got, _ := c.get("a"); got.Spec.StorageClassName != "written" {
		t.Errorf("after a newer informer object: class %q", got.Spec.StorageClassName)
	}
	c.observe(newer, false)
	if c.assumedCount() != 0 {
		t.Errorf("%d still assumed", c.assumedCount())
	}
	// Restore drops an assumption; a deleted object is gone whatever was assumed.
	if err := c.assume(withVersion(volume("a", "again", "1Gi", ""), "6")); err != nil {
		t.Fatal(err)
	}
	c.restore("a")
	if got, _ := c.get("a"); got.Spec.StorageClassName != "written" {
		t.Errorf("after restore: class %q", got.Spec.StorageClassName)
	}
	_ = c.assume(withVersion(volume("a", "again", "1Gi", ""), "6"))
	_ = store.Delete(newer)
	c.observe(cache.DeletedFinalStateUnknown{Key: "a", Obj: newer}, true)
	if _, err := c.get("a"); err == nil || c.assumedCount() != 0 {
		t.Errorf("after delete: %v, %d assumed", err, c.assumedCount())
	}
}
