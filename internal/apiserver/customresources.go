package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/kubette/kubette/internal/apiserver/watchcache"
	"github.com/kubette/kubette/internal/registry"
)

// customCaches are the watch caches of the custom resources being served, one per
// definition (all its versions share the storage prefix), each stopped on its own
// when the definition stops being served or changes.
type customCaches struct {
	mu sync.RWMutex
	// ctx is the server's: a custom cache runs until it is removed or ctx ends.
	ctx    context.Context
	byName map[string]*customCache // by definition name
	byPfx  map[string]*customCache // by storage prefix
}

// customCache is one definition's watch cache and what it was made from.
type customCache struct {
	cache  *watchcache.Cache
	cancel context.CancelFunc
	prefix string
	// def is the definition as installed: a change of its spec or accepted names
	// reinstalls it (a status change alone does not).
	def *apiextensionsv1.CustomResourceDefinition
	// terminating is set once the definition is being deleted: creates are refused.
	terminating atomic.Bool
}

// terminating reports whether the named definition is being deleted.
func (c *customCaches) terminating(name string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	cc := c.byName[name]
	return cc != nil && cc.terminating.Load()
}

// errTerminating is upstream's answer to a create of a custom resource whose
// definition is being deleted.
func errTerminating(r *registry.Resource) error {
	err := apierrors.NewMethodNotSupported(r.GroupResource(), "create")
	err.ErrStatus.Message = "create not allowed while custom resource definition is terminating"
	return err
}

func (c *customCaches) get(prefix string) *watchcache.Cache {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if cc := c.byPfx[prefix]; cc != nil {
		return cc.cache
	}
	return nil
}

// InstallCustomResources serves the resources of a CustomResourceDefinition (every
// served version) or, when it changed since it was installed, serves them anew: its
// watch cache is made again, so that every object is read with the current schemas
// (watches of the old cache end, and clients watch again). A definition installed as
// it is changes nothing. It returns once the new cache has listed the objects.
func (s *Server) InstallCustomResources(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	terminating := apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Terminating)
	s.custom.mu.RLock()
	old := s.custom.byName[crd.Name]
	s.custom.mu.RUnlock()
	if old != nil {
		old.terminating.Store(terminating)
	}
	if old != nil && apiequality.Semantic.DeepEqual(old.def.Spec, crd.Spec) &&
		apiequality.Semantic.DeepEqual(old.def.Status.AcceptedNames, crd.Status.AcceptedNames) {
		return nil
	}
	resources, err := registry.CustomResources(crd)
	if err != nil {
		return fmt.Errorf("serve %s: %w", crd.Name, err)
	}
	if len(resources) == 0 {
		s.RemoveCustomResources(crd.Name)
		return nil
	}
	for _, r := range resources {
		if b, ok := s.table.Lookup(r.GroupVersion, r.Plural); ok && b.Custom == nil {
			return fmt.Errorf("serve %s: %s/%s is a built-in resource", crd.Name, r.GroupVersion, r.Plural)
		}
	}
	prefix := resources[0].Prefix("")
	cctx, cancel := context.WithCancel(s.custom.ctx)
	c := watchcache.New(watchcache.Config{
		Prefix: prefix, Store: s.cfg.Store, Decode: s.storageDecoder(resources[0]),
		Capacity: s.cfg.WatchCacheCapacity, BookmarkInterval: s.cfg.BookmarkInterval, Logger: s.log,
	})
	go c.Run(cctx)
	if err := c.WaitReady(ctx); err != nil {
		cancel()
		return fmt.Errorf("serve %s: the watch cache did not load: %w", crd.Name, err)
	}
	cc := &customCache{cache: c, cancel: cancel, prefix: prefix, def: crd.DeepCopy()}
	cc.terminating.Store(terminating)
	s.custom.mu.Lock()
	prev := s.custom.byName[crd.Name]
	if prev != nil {
		delete(s.custom.byPfx, prev.prefix)
	}
	s.custom.byName[crd.Name] = cc
	s.custom.byPfx[prefix] = cc
	s.table.SetOwned(registry.CustomResourceOwner(crd), resources)
	s.custom.mu.Unlock()
	if prev != nil {
		prev.cancel()
	}
	s.log.Info("serving custom resources", "crd", crd.Name, "versions", len(resources))
	s.publishCustomOpenAPI()
	return nil
}

// publishCustomOpenAPI rebuilds the OpenAPI documents of the served definitions.
func (s *Server) publishCustomOpenAPI() {
	s.custom.mu.RLock()
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(s.custom.byName))
	for _, cc := range s.custom.byName {
		crds = append(crds, cc.def)
	}
	s.custom.mu.RUnlock()
	if err := s.docs.setCustom(crds); err != nil {
		s.log.Error("publish the openapi of custom resources", "err", err)
	}
}

// RemoveCustomResources stops serving the resources of the named definition (its
// objects stay in storage).
func (s *Server) RemoveCustomResources(name string) {
	s.custom.mu.Lock()
	cc := s.custom.byName[name]
	delete(s.custom.byName, name)
	if cc != nil {
		delete(s.custom.byPfx, cc.prefix)
	}
	removed := s.table.RemoveOwned(name)
	s.custom.mu.Unlock()
	if cc != nil {
		cc.cancel()
	}
	if len(removed) > 0 {
		s.log.Info("stopped serving custom resources", "crd", name)
		s.publishCustomOpenAPI()
	}
}

// ServesCustomResources reports whether the named definition's resources are served.
func (s *Server) ServesCustomResources(name string) bool {
	s.custom.mu.RLock()
	defer s.custom.mu.RUnlock()
	return s.custom.byName[name] != nil
}

// decodeCustomStored decodes a custom object from storage (JSON, as upstream stores
// them) in the storage version, read by that version's schema: fields it does not
// know are pruned and its defaults applied, as upstream's storage codec does.
func decodeCustomStored(r *registry.Resource, value []byte) (runtime.Object, error) {
	var m map[string]any
	if err := utiljson.Unmarshal(value, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(r.StorageGVK())
	if _, err := r.Normalize(u, false); err != nil {
		return nil, err
	}
	r.Default(u)
	return u, nil
}

// encodeCustomForStorage is a custom object's stored form: JSON.
func encodeCustomForStorage(obj runtime.Object) ([]byte, error) {
	return json.Marshal(obj)
}

// convertCustom returns a copy of a custom object in version gvk's version, read by
// that version's schema (conversion "None": only apiVersion changes, then pruning and
// defaults of the target version, as upstream's converter and defaulter).
func convertCustom(r *registry.Resource, obj runtime.Object, version string) runtime.Object {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj
	}
	out := u.DeepCopy()
	gvk := r.GroupVersionKind()
	gvk.Version = version
	out.SetGroupVersionKind(gvk)
	if _, err := r.Normalize(out, false); err == nil {
		r.Default(out)
	}
	return out
}
