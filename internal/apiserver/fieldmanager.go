package apiserver

import (
	"context"
	"fmt"
	"slices"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsac "k8s.io/apiextensions-apiserver/pkg/client/applyconfiguration"
	openapibuilder "k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationac "k8s.io/kube-aggregator/pkg/client/applyconfiguration"
	"k8s.io/kube-openapi/pkg/spec3"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/kubette/kubette/internal/registry"
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
	// creates holds, per kind, what the create path keeps (createManaged); strip is
	// the set of fields never recorded as managed.
	cmu     sync.RWMutex
	creates map[schema.GroupVersionKind]*createFields
	strip   *fieldpath.Set
}

// defaulter applies a kind's defaults through its strategy (the field manager defaults
// applied configurations before it merges them).
type defaulter struct{ r *registry.Resource }

// Default applies the kind's defaults.
func (d defaulter) Default(obj runtime.Object) { d.r.Default(obj) }

func newFieldManagers(ctx context.Context, s *Server) *fieldManagers {
	f := &fieldManagers{scheme: s.scheme, ready: make(chan struct{}), managers: map[string]*managedfields.FieldManager{}, log: s.log.Error,
		creates: map[schema.GroupVersionKind]*createFields{}, strip: newStripSet()}
	go func() {
		f.converter = newTypeConverter(byGroup{
			fallback: applyconfigurations.NewTypeConverter(s.scheme),
			groups: map[string]managedfields.TypeConverter{
				apiextensionsv1.GroupName:   apiextensionsac.NewTypeConverter(s.scheme),
				apiregistrationv1.GroupName: apiregistrationac.NewTypeConverter(s.scheme),
			},
		}, s.scheme)
		close(f.ready)
	}()
	return f
}

func (f *fieldManagers) get(r *registry.Resource, sub string) (*managedfields.FieldManager, error) {
	<-f.ready
	gvk := r.GroupVersionKind()
	key := gvk.String() + "/" + sub
	f.mu.Lock()
	defer f.mu.Unlock()
	if m, ok := f.managers[key]; ok {
		return m, nil
	}
	var m *managedfields.FieldManager
	var err error
	if r.Custom != nil {
		// Keyed by the definition as served: a changed definition gets a new one.
		key = fmt.Sprintf("%s/%s/%p", gvk, sub, r.Custom)
		if m, ok := f.managers[key]; ok {
			return m, nil
		}
		m, err = customManager(r, sub)
	} else {
		m, err = managedfields.NewDefaultFieldManager(f.converter, f.scheme, defaulter{r}, f.scheme, gvk, gvk.GroupVersion(), sub, nil)
	}
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
	if live == nil && sub == "" && r.Custom == nil && f.createManaged(r, obj, manager) {
		return obj
	}
	m, err := f.get(r, sub)
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
	m, err := f.get(r, sub)
	if err != nil {
		return nil, err
	}
	return m.Apply(live, applied, manager, force)
}

// byGroup is the type converter of each API group whose schemas its module publishes
// apart from k8s.io/api's (client-go's applyconfigurations): apiextensions.k8s.io's
// from k8s.io/apiextensions-apiserver. TypedToObject needs no schema, so any of them
// serves it.
type byGroup struct {
	fallback managedfields.TypeConverter
	groups   map[string]managedfields.TypeConverter
}

func (b byGroup) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if c, ok := b.groups[obj.GetObjectKind().GroupVersionKind().Group]; ok {
		return c.ObjectToTyped(obj, opts...)
	}
	return b.fallback.ObjectToTyped(obj, opts...)
}

func (b byGroup) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return b.fallback.TypedToObject(v)
}

// typeConverter wraps the scheme's type converter for the update path. It resolves the
// schema of each kind once, and it does not validate a Go-typed object against that
// schema when the caller allows duplicates — as the field manager does for the live and
// the new object of every update and for the live object of an apply. There a typed
// Go object always has its kind's schema (the schema is generated from the same Go
// types), so the validation walk (about half of the managed-fields work in profiles)
// cannot fail and changes nothing. Unstructured objects (applied configurations) and
// calls without AllowDuplicates go through the wrapped converter unchanged.
type typeConverter struct {
	inner  managedfields.TypeConverter
	scheme *runtime.Scheme
	mu     sync.RWMutex
	types  map[schema.GroupVersionKind]resolvedType
}

// resolvedType is the schema and type of one kind.
type resolvedType struct {
	schema *smdschema.Schema
	ref    smdschema.TypeRef
}

func newTypeConverter(inner managedfields.TypeConverter, scheme *runtime.Scheme) *typeConverter {
	return &typeConverter{inner: inner, scheme: scheme, types: map[schema.GroupVersionKind]resolvedType{}}
}

// ObjectToTyped converts obj to a typed value, as the wrapped converter does.
func (c *typeConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if _, ok := obj.(runtime.Unstructured); ok || !slices.Contains(opts, typed.AllowDuplicates) {
		return c.inner.ObjectToTyped(obj, opts...)
	}
	t, ok := c.resolve(obj.GetObjectKind().GroupVersionKind())
	if !ok {
		return c.inner.ObjectToTyped(obj, opts...)
	}
	v, err := value.NewValueReflect(obj)
	if err != nil {
		return nil, fmt.Errorf("error creating struct value reflector: %v", err)
	}
	return typed.AsTypedUnvalidated(v, t.schema, t.ref), nil
}

// TypedToObject converts a typed value back, as the wrapped converter does.
func (c *typeConverter) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return c.inner.TypedToObject(v)
}

// resolve returns the schema and type of gvk, found once through the wrapped converter
// on an empty object of the kind.
func (c *typeConverter) resolve(gvk schema.GroupVersionKind) (resolvedType, bool) {
	c.mu.RLock()
	t, ok := c.types[gvk]
	c.mu.RUnlock()
	if ok {
		return t, t.schema != nil
	}
	empty, err := c.scheme.New(gvk)
	if err == nil {
		empty.GetObjectKind().SetGroupVersionKind(gvk)
		var tv *typed.TypedValue
		if tv, err = c.inner.ObjectToTyped(empty, typed.AllowDuplicates); err == nil {
			t = resolvedType{schema: tv.Schema(), ref: tv.TypeRef()}
		}
	}
	c.mu.Lock()
	c.types[gvk] = t
	c.mu.Unlock()
	return t, t.schema != nil
}

// customManager builds the field manager of a custom resource version, as upstream's
// custom resource handler does: the type converter comes from the definition's
// OpenAPI schemas of every version (upstream's builder, with value validations and
// nullable stripped), objects are unstructured and convert between versions by their
// apiVersion alone.
func customManager(r *registry.Resource, sub string) (*managedfields.FieldManager, error) {
	crd := r.Custom.Definition
	var specs []*spec3.OpenAPI
	for _, v := range crd.Spec.Versions {
		doc, err := openapibuilder.BuildOpenAPIV3(crd, v.Name, openapibuilder.Options{
			V2: false, StripValueValidation: true, StripNullable: true, AllowNonStructural: false,
		})
		if err != nil {
			return nil, fmt.Errorf("openapi of %s %s: %w", crd.Name, v.Name, err)
		}
		specs = append(specs, doc)
	}
	merged, err := openapibuilder.MergeSpecsV3(specs...)
	if err != nil {
		return nil, fmt.Errorf("merge the openapi of %s: %w", crd.Name, err)
	}
	tc, err := managedfields.NewTypeConverter(merged.Components.Schemas, crd.Spec.PreserveUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("type converter of %s: %w", crd.Name, err)
	}
	gvk := r.GroupVersionKind()
	// The hub is the request's version: with conversion None every version holds the
	// same fields, so the entries of other versions convert to it by apiVersion alone.
	return managedfields.NewDefaultCRDFieldManager(tc, unstructuredConverter{}, defaulter{r}, unstructuredCreater{}, gvk, gvk.GroupVersion(), sub, nil)
}

// unstructuredConverter converts custom objects between the versions of their
// definition (conversion None: the apiVersion changes).
type unstructuredConverter struct{}

func (unstructuredConverter) Convert(in, out, _ any) error {
	u, ok1 := in.(*unstructured.Unstructured)
	o, ok2 := out.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return fmt.Errorf("cannot convert %T to %T", in, out)
	}
	o.Object = u.DeepCopy().Object
	return nil
}

func (unstructuredConverter) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("cannot convert %T", in)
	}
	target, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{u.GroupVersionKind()})
	if !ok {
		return nil, fmt.Errorf("%s cannot be converted to %v", u.GroupVersionKind(), gv)
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(target)
	return out, nil
}

func (unstructuredConverter) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// unstructuredCreater makes empty custom objects.
type unstructuredCreater struct{}

func (unstructuredCreater) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	return u, nil
}
