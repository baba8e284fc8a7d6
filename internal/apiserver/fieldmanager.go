package apiserver

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"

	"github.com/kubette/kubette/internal/registry"
	"github.com/kubette/kubette/internal/registry/defaults"
)

// fieldManagers tracks managedFields on every write and serves server-side apply, with
// one managedfields.FieldManager per kind and subresource. The type converter is built
// in the background at start-up (it parses the schemas of every built-in type).
type fieldManagers struct {
	scheme    *runtime.Scheme
	converter managedfields.TypeConverter
	ready     chan struct{}
	mu        sync.Mutex
	managers  map[string]*managedfields.FieldManager
	log       func(msg string, args ...any)
}

type defaulter struct{}

// Default applies the upstream defaults.
func (defaulter) Default(obj runtime.Object) { defaults.Apply(obj) }

func newFieldManagers(ctx context.Context, s *Server) *fieldManagers {
	f := &fieldManagers{scheme: s.scheme, ready: make(chan struct{}), managers: map[string]*managedfields.FieldManager{}, log: s.log.Error}
	go func() {
		f.converter = applyconfigurations.NewTypeConverter(s.scheme)
		close(f.ready)
	}()
	return f
}

func (f *fieldManagers) get(gvk schema.GroupVersionKind, sub string) (*managedfields.FieldManager, error) {
	<-f.ready
	key := gvk.String() + "/" + sub
	f.mu.Lock()
	defer f.mu.Unlock()
	if m, ok := f.managers[key]; ok {
		return m, nil
	}
	m, err := managedfields.NewDefaultFieldManager(f.converter, f.scheme, defaulter{}, f.scheme, gvk, gvk.GroupVersion(), sub, nil)
	if err != nil {
		return nil, fmt.Errorf("field manager for %s: %w", gvk, err)
	}
	f.managers[key] = m
	return m, nil
}

// update records manager as the owner of the fields it changed from live (nil on create) to obj.
func (f *fieldManagers) update(r *registry.Resource, sub string, live, obj runtime.Object, manager string) runtime.Object {
	if sub == "binding" {
		sub = ""
	}
	m, err := f.get(r.GroupVersionKind(), sub)
	if err != nil {
		f.log("managed fields", "err", err)
		return obj
	}
	if live == nil {
		live = r.New()
		setServedTypeMeta(r, live)
	}
	return m.UpdateNoErrors(live, obj, manager)
}

// apply merges an applied configuration into live as server-side apply does.
func (f *fieldManagers) apply(r *registry.Resource, sub string, live, applied runtime.Object, manager string, force bool) (runtime.Object, error) {
	m, err := f.get(r.GroupVersionKind(), sub)
	if err != nil {
		return nil, err
	}
	return m.Apply(live, applied, manager, force)
}
