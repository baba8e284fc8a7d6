package ownwrites

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func cm(uid, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: types.UID("u" + uid), ResourceVersion: rv}}
}

func TestLatest(t *testing.T) {
	c := New[*corev1.ConfigMap]()
	cached := cm("1", "5")
	if got := c.Latest("k", cached); got != cached {
		t.Fatal("nothing written: want the cached object")
	}
	w := cm("1", "7")
	c.Remember("k", w)
	if got := c.Latest("k", cached); got != w {
		t.Fatal("newer write: want it")
	}
	if other := cm("2", "3"); c.Latest("k", other) != other {
		t.Fatal("another object of the same key: want the cached one")
	}
	// That forgot the write: an older cached version is returned as is now.
	if got := c.Latest("k", cached); got != cached {
		t.Fatal("forgotten write returned")
	}
	c.Remember("k", w)
	caught := cm("1", "7")
	if got := c.Latest("k", caught); got != caught {
		t.Fatal("cache caught up: want the cached object")
	}
	c.Remember("k", w)
	c.Forget("k")
	if got := c.Latest("k", cached); got != cached {
		t.Fatal("Forget did not forget")
	}
}
