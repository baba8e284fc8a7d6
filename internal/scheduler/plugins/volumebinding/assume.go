package volumebinding

import (
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// storageObject is what the assume cache holds: volumes or claims.
type storageObject interface {
	*corev1.PersistentVolume | *corev1.PersistentVolumeClaim
	GetNamespace() string
	GetName() string
	GetResourceVersion() string
}

// assumeCache lays the bindings the plugin decided (assumed) over an
// informer's store, as upstream's assume cache: between Reserve and the
// informer delivering the written object, every later scheduling cycle sees a
// volume as taken by the claim it was given, so that two pods never pick the
// same volume. The informer's object wins as soon as it is newer than the
// assumed one; an assumed object older than the informer's is refused.
type assumeCache[T storageObject] struct {
	kind  string // for errors, e.g. "v1.PersistentVolume"
	store cache.Store

	mu      sync.RWMutex
	assumed map[string]T
}

func newAssumeCache[T storageObject](kind string, store cache.Store) *assumeCache[T] {
	return &assumeCache[T]{kind: kind, store: store, assumed: map[string]T{}}
}

// notFoundError is the error for a key the informer does not hold.
type notFoundError struct {
	kind, key string
}

func (e *notFoundError) Error() string { return fmt.Sprintf("could not find %s %q", e.kind, e.key) }

func objectKey[T storageObject](obj T) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

func version[T storageObject](kind string, obj T) (int64, error) {
	v, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("resourceVersion %q of %s %q: %w", obj.GetResourceVersion(), kind, objectKey(obj), err)
	}
	return v, nil
}

// getAPI returns the informer's object at key.
func (c *assumeCache[T]) getAPI(key string) (T, error) {
	obj, ok, err := c.store.GetByKey(key)
	if err != nil {
		return nil, fmt.Errorf("get %s %q: %w", c.kind, key, err)
	}
	if !ok {
		return nil, &notFoundError{kind: c.kind, key: key}
	}
	t, ok := obj.(T)
	if !ok {
		return nil, fmt.Errorf("the %s cache holds a %T at %q", c.kind, obj, key)
	}
	return t, nil
}

// get returns the latest object at key: the assumed one unless the informer's is newer.
func (c *assumeCache[T]) get(key string) (T, error) {
	api, err := c.getAPI(key)
	if err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.latest(key, api), nil
}

// latest picks between the informer's object and the assumed one; the caller holds mu.
func (c *assumeCache[T]) latest(key string, api T) T {
	a, ok := c.assumed[key]
	if !ok {
		return api
	}
	av, err1 := version(c.kind, a)
	iv, err2 := version(c.kind, api)
	if err1 != nil || err2 != nil || iv > av {
		return api
	}
	return a
}

// list returns the latest version of every object for which keep holds.
func (c *assumeCache[T]) list(keep func(T) bool) []T {
	objs := c.store.List()
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []T
	for _, o := range objs {
		api, ok := o.(T)
		if !ok {
			continue
		}
		if t := c.latest(objectKey(api), api); keep(t) {
			out = append(out, t)
		}
	}
	return out
}

// assume lays obj over the informer's object of its key, which must exist and
// must not be newer than obj.
func (c *assumeCache[T]) assume(obj T) error {
	key := objectKey(obj)
	api, err := c.getAPI(key)
	if err != nil {
		return err
	}
	newVersion, err := version(c.kind, obj)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	stored, err := version(c.kind, c.latest(key, api))
	if err != nil {
		return err
	}
	if newVersion < stored {
		return fmt.Errorf("%s %q is out of sync (stored: %d, assume: %d)", c.kind, key, stored, newVersion)
	}
	c.assumed[key] = obj
	return nil
}

// restore drops what was assumed at key: the informer's object is the latest again.
func (c *assumeCache[T]) restore(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.assumed, key)
}

// observe forgets what was assumed at the key of an object the informer
// delivered when the informer's version is newer (or the object is gone), so
// that assumed objects do not outlive their use.
func (c *assumeCache[T]) observe(obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = t.Obj, true
	}
	api, ok := obj.(T)
	if !ok {
		return
	}
	key := objectKey(api)
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.assumed[key]
	if !ok {
		return
	}
	if !deleted {
		av, err1 := version(c.kind, a)
		iv, err2 := version(c.kind, api)
		if err1 == nil && err2 == nil && iv <= av {
			return
		}
	}
	delete(c.assumed, key)
}

// assumedCount is how many objects are assumed (for tests).
func (c *assumeCache[T]) assumedCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.assumed)
}
