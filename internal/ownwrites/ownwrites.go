// Package ownwrites remembers the objects a component wrote last, for the moments when
// its cache (an informer, the API server's watch cache) does not show those writes yet:
// reading through it, a component never decides from an older version of what it just
// wrote. Upstream's controllers use client-go's mutation cache for the same reason.
package ownwrites

import (
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cache holds the last written version of each object by key. The zero value is not
// ready: use New. It is safe for concurrent use.
type Cache[T metav1.Object] struct {
	mu      sync.Mutex
	written map[string]T
}

// New returns an empty cache.
func New[T metav1.Object]() *Cache[T] { return &Cache[T]{written: map[string]T{}} }

// Remember records obj as the last version written of key.
func (c *Cache[T]) Remember(key string, obj T) {
	c.mu.Lock()
	c.written[key] = obj
	c.mu.Unlock()
}

// Forget drops what was written of key (the object is gone).
func (c *Cache[T]) Forget(key string) {
	c.mu.Lock()
	delete(c.written, key)
	c.mu.Unlock()
}

// Latest returns the remembered write of key when it is of the same object as cached
// and newer than it, else cached (and forgets a write the cache has caught up with).
func (c *Cache[T]) Latest(key string, cached T) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.written[key]
	if !ok {
		return cached
	}
	if w.GetUID() == cached.GetUID() && newer(w.GetResourceVersion(), cached.GetResourceVersion()) {
		return w
	}
	delete(c.written, key)
	return cached
}

// newer reports whether resource version a is after b (both etcd revisions).
func newer(a, b string) bool {
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	return err1 == nil && err2 == nil && x > y
}
