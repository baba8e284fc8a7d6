package registry

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	crvalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"
)

// Custom describes what a custom resource's entry holds beyond the generic fields:
// its definition and the schema-driven steps of its codec.
type Custom struct {
	// Definition is the CustomResourceDefinition the resource comes from (shared: read only).
	Definition *apiextensionsv1.CustomResourceDefinition
	// Structural is the version's structural schema.
	Structural *structuralschema.Structural
	// Table renders objects for kubectl get from the additionalPrinterColumns.
	Table tableConverter
	// schemas are the structural schemas of every version of the definition (served
	// or not): an object is normalised and defaulted by the schema of its apiVersion,
	// so that one read from storage follows the storage version's.
	schemas map[string]*structuralschema.Structural
}

// CustomResourceOwner is the table owner of a definition's resources: its name.
func CustomResourceOwner(crd *apiextensionsv1.CustomResourceDefinition) string { return crd.Name }

// CustomResources returns the table entries of a CustomResourceDefinition, one per
// served version, as upstream's custom resource handler serves them: objects are
// unstructured and stored as JSON under /registry/<group>/<plural>, in the storage
// version; their strategy, validation (schema, embedded metadata, list types and CEL
// rules), printer columns and selectable fields are upstream's own
// (k8s.io/apiextensions-apiserver/pkg/registry/customresource), and so are the
// pruning, defaulting and metadata coercion of the schema packages.
func CustomResources(crd *apiextensionsv1.CustomResourceDefinition) ([]*Resource, error) {
	internal, errs := newCRDConverter().internal(crd)
	if errs != nil {
		return nil, errs.ToAggregate()
	}
	var storage string
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			storage = v.Name
		}
	}
	if storage == "" {
		return nil, fmt.Errorf("custom resource definition %s has no storage version", crd.Name)
	}
	names := crd.Status.AcceptedNames
	if names.Plural == "" {
		names = crd.Spec.Names
	}
	schemas := map[string]*structuralschema.Structural{}
	for _, v := range internal.Spec.Versions {
		sv, err := apiextensions.GetSchemaForVersion(internal, v.Name)
		if err != nil || sv == nil || sv.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("custom resource %s version %s: no schema", crd.Name, v.Name)
		}
		st, err := structuralschema.NewStructural(sv.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("custom resource %s version %s: structural schema: %w", crd.Name, v.Name, err)
		}
		schemas[v.Name] = st
	}
	var out []*Resource
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		r, err := customResource(crd, internal, v, names, storage, schemas)
		if err != nil {
			return nil, fmt.Errorf("custom resource %s version %s: %w", crd.Name, v.Name, err)
		}
		out = append(out, r)
	}
	// Discovery lists a group's versions by priority, the preferred first.
	sort.SliceStable(out, func(i, j int) bool {
		return version.CompareKubeAwareVersionStrings(out[i].GroupVersion.Version, out[j].GroupVersion.Version) > 0
	})
	return out, nil
}

func customResource(crd *apiextensionsv1.CustomResourceDefinition, internal *apiextensions.CustomResourceDefinition, v apiextensionsv1.CustomResourceDefinitionVersion, names apiextensionsv1.CustomResourceDefinitionNames, storage string, schemas map[string]*structuralschema.Structural) (*Resource, error) {
	gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
	gvk := gv.WithKind(names.Kind)
	namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped
	sv, err := apiextensions.GetSchemaForVersion(internal, v.Name)
	if err != nil {
		return nil, err
	}
	props := sv.OpenAPIV3Schema
	structural := schemas[v.Name]
	sub, err := apiextensions.GetSubresourcesForVersion(internal, v.Name)
	if err != nil {
		return nil, err
	}
	validator, _, err := crvalidation.NewSchemaValidator(props)
	if err != nil {
		return nil, fmt.Errorf("schema validator: %w", err)
	}
	var statusSpec *apiextensions.CustomResourceSubresourceStatus
	var scaleSpec *apiextensions.CustomResourceSubresourceScale
	var statusValidator crvalidation.SchemaValidator
	subresources := []string{}
	if sub != nil && sub.Status != nil {
		statusSpec = sub.Status
		subresources = append(subresources, "status")
		if st, ok := props.Properties["status"]; ok {
			if statusValidator, _, err = crvalidation.NewSchemaValidator(&st); err != nil {
				return nil, fmt.Errorf("status schema validator: %w", err)
			}
		}
	}
	if sub != nil && sub.Scale != nil {
		scaleSpec = sub.Scale
		subresources = append(subresources, "scale")
	}
	strategy := customresource.NewStrategy(nil, namespaced, gvk, validator, statusValidator, structural, statusSpec, scaleSpec, v.SelectableFields)
	var status statusStrategy
	if statusSpec != nil {
		status = customresource.NewStatusStrategy(strategy)
	}
	columns := v.AdditionalPrinterColumns
	if len(columns) == 0 {
		columns = []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"}}
	}
	table, err := tableconvertor.New(columns)
	if err != nil {
		return nil, fmt.Errorf("printer columns: %w", err)
	}
	custom := &Custom{Definition: crd, Structural: structural, Table: table, schemas: schemas}
	listGVK := gv.WithKind(names.ListKind)
	r := &Resource{
		GroupVersion: gv, Kind: names.Kind, ListKind: names.ListKind, Plural: names.Plural, Singular: names.Singular,
		Namespaced: namespaced, ShortNames: names.ShortNames, Categories: names.Categories,
		StoragePrefix:  "/registry/" + crd.Spec.Group + "/" + names.Plural,
		StorageVersion: schema.GroupVersion{Group: crd.Spec.Group, Version: storage},
		Subresources:   subresources,
		Custom:         custom,
		Strategy:       customStrategy(strategy, status, custom, scaleSpec),
		New: func() runtime.Object {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			return u
		},
		NewList: func() runtime.Object {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(listGVK)
			return l
		},
		shape: &shape{spec: true, status: statusSpec != nil},
	}
	if len(v.SelectableFields) > 0 {
		r.Fields = func(obj runtime.Object) fields.Set {
			_, set, err := strategy.GetAttrs(obj)
			if err != nil || set == nil {
				return fields.Set{}
			}
			delete(set, "metadata.name")
			delete(set, "metadata.namespace")
			return set
		}
	}
	return r, nil
}

// customStrategy adapts upstream's custom resource strategy to the generic write path.
func customStrategy(s customResourceStrategy, status statusStrategy, c *Custom, scale *apiextensions.CustomResourceSubresourceScale) Strategy {
	ctx := context.Background()
	st := Strategy{
		PrepareForCreate: func(obj runtime.Object) { s.PrepareForCreate(ctx, obj) },
		PrepareForUpdate: func(obj, old runtime.Object) { s.PrepareForUpdate(ctx, obj, old) },
		GenerationChanged: func(obj, old runtime.Object) bool {
			n, ok1 := obj.(*unstructured.Unstructured)
			o, ok2 := old.(*unstructured.Unstructured)
			return ok1 && ok2 && !apiequality.Semantic.DeepEqual(withoutMetadata(n.Object), withoutMetadata(o.Object))
		},
		Default:        c.defaults,
		Normalize:      func(obj runtime.Object, request bool) ([]string, error) { return c.normalize(obj, request) },
		Validate:       func(obj runtime.Object) field.ErrorList { return s.Validate(ctx, obj) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList { return s.ValidateUpdate(ctx, obj, old) },
	}
	if ss := status; ss != nil {
		st.Subresources = map[string]SubresourceStrategy{"status": {
			PrepareForUpdate: func(obj, old runtime.Object) runtime.Object { ss.PrepareForUpdate(ctx, obj, old); return obj },
			ValidateUpdate:   func(obj, old runtime.Object) field.ErrorList { return ss.ValidateUpdate(ctx, obj, old) },
			Verbs:            []string{"get", "update", "patch"},
		}}
	}
	if scale != nil {
		st.Scale = customScale(scale)
	}
	return st
}

// customResourceStrategy is the part of upstream's strategy the adapter calls.
type customResourceStrategy interface {
	PrepareForCreate(ctx context.Context, obj runtime.Object)
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
	GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error)
}

// statusStrategy is the part of upstream's status strategy the adapter calls.
type statusStrategy interface {
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// withoutMetadata is a shallow copy of an object's content without its metadata: what
// a change of increments the generation.
func withoutMetadata(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// normalize is what upstream's custom resource codec does to every object it decodes,
// from a request (request true) or from storage: the metadata is read as ObjectMeta
// (fields of the wrong type are an error in a request and dropped from storage),
// fields the schema does not know are pruned unless preserved, nulls the schema does
// not allow are dropped, and embedded resources' metadata are coerced. It returns the
// paths of the unknown fields of a request, for fieldValidation.
func (c *Custom) normalize(obj runtime.Object, request bool) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("not an unstructured object: %T", obj)
	}
	st := c.schemaOf(u)
	om, found, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(u.Object, schemaobjectmeta.ObjectMetaOptions{
		DropMalformedFields: !request, ReturnUnknownFieldPaths: request,
	})
	if err != nil {
		return nil, err
	}
	if found {
		if err := schemaobjectmeta.SetObjectMeta(u.Object, om); err != nil {
			return nil, err
		}
	}
	if !st.XPreserveUnknownFields {
		pruned := structuralpruning.PruneWithOptions(u.Object, st, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: request})
		unknown = append(unknown, pruned...)
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, st)
	}
	ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, u.Object, st, false, schemaobjectmeta.CoerceOptions{
		DropInvalidFields: !request, ReturnUnknownFieldPaths: request,
	})
	if ferr != nil {
		return nil, ferr
	}
	return append(unknown, paths...), nil
}

// schemaOf is the structural schema of an object's apiVersion (this resource's
// version's when the object names none the definition has).
func (c *Custom) schemaOf(u *unstructured.Unstructured) *structuralschema.Structural {
	if gv, err := schema.ParseGroupVersion(u.GetAPIVersion()); err == nil {
		if st, ok := c.schemas[gv.Version]; ok {
			return st
		}
	}
	return c.Structural
}

// defaults applies the schema defaults of an object's apiVersion.
func (c *Custom) defaults(obj runtime.Object) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		structuraldefaulting.Default(u.Object, c.schemaOf(u))
	}
}

// customScale maps the scale subresource onto the paths the definition names.
func customScale(sc *apiextensions.CustomResourceSubresourceScale) *ScaleStrategy {
	specPath := jsonFields(sc.SpecReplicasPath)
	statusPath := jsonFields(sc.StatusReplicasPath)
	var selectorPath []string
	if sc.LabelSelectorPath != nil {
		selectorPath = jsonFields(*sc.LabelSelectorPath)
	}
	return &ScaleStrategy{
		Replicas: func(obj runtime.Object) (int32, int32, string, error) {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return 0, 0, "", errWrongType(obj)
			}
			spec, _, err := nestedInt32(u.Object, specPath)
			if err != nil {
				return 0, 0, "", err
			}
			status, _, err := nestedInt32(u.Object, statusPath)
			if err != nil {
				return 0, 0, "", err
			}
			var selector string
			if len(selectorPath) > 0 {
				selector, _, _ = unstructured.NestedString(u.Object, selectorPath...)
			}
			return spec, status, selector, nil
		},
		SetReplicas: func(obj runtime.Object, n int32) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				_ = unstructured.SetNestedField(u.Object, int64(n), specPath...)
			}
		},
	}
}

// jsonFields splits a simple JSON path such as .spec.replicas into its fields.
func jsonFields(path string) []string {
	return strings.Split(strings.TrimPrefix(path, "."), ".")
}

// nestedInt32 reads an integer field (absent is 0).
func nestedInt32(obj map[string]any, path []string) (int32, bool, error) {
	v, found, err := unstructured.NestedFieldNoCopy(obj, path...)
	if err != nil || !found {
		return 0, false, err
	}
	switch n := v.(type) {
	case int64:
		return int32(n), true, nil
	case float64:
		return int32(n), true, nil
	case string:
		i, err := strconv.Atoi(n)
		return int32(i), true, err
	}
	return 0, false, fmt.Errorf(".%s is not an integer", strings.Join(path, "."))
}

// CustomTable renders custom objects as a Table with the resource's printer columns.
func (r *Resource) CustomTable(ctx context.Context, objs []runtime.Object) (*metav1.Table, error) {
	list := &unstructured.UnstructuredList{}
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			list.Items = append(list.Items, *u)
		}
	}
	return r.Custom.Table.ConvertToTable(ctx, list, nil)
}

// tableConverter is what upstream's tableconvertor returns: it renders a list as a Table.
type tableConverter interface {
	ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error)
}
