package openapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// schemaRefPrefix is the JSON pointer prefix of every component reference.
const schemaRefPrefix = "#/components/schemas/"

// Interfaces the apimachinery types implement to tell OpenAPI generators how
// they are serialised (see k8s.io/apimachinery resource.Quantity,
// intstr.IntOrString, metav1.Time, metav1.MicroTime and metav1.Duration).
type (
	swaggerDocer interface{ SwaggerDoc() map[string]string }
	schemaTyper  interface{ OpenAPISchemaType() []string }
	schemaFormat interface{ OpenAPISchemaFormat() string }
	oneOfTyper   interface{ OpenAPIV3OneOfTypes() []string }
)

// implements reports whether a value or pointer of type t implements I.
func implements[I any](t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(reflect.TypeFor[I]())
}

// as returns a pointer to a new zero value of t as an I; t must implement
// I (see implements).
func as[I any](t reflect.Type) I {
	return reflect.New(t).Interface().(I)
}

// isPlainObject reports whether t is rendered as an object with properties
// (a struct without its own JSON encoding or declared OpenAPI type).
func isPlainObject(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && !implements[schemaTyper](t) && !implements[oneOfTyper](t) &&
		!implements[json.Marshaler](t) && t != reflect.TypeFor[metav1.GroupVersion]()
}

// component is one named schema under components.schemas.
type component struct {
	name string
	typ  reflect.Type
	// raw is the rendered JSON of the schema.
	raw json.RawMessage
	// deps are the names of the components the schema references directly.
	deps []string
}

// generator turns Go types into OpenAPI v3 schemas by reflection. One
// generator is used per Build; it renders every named type exactly once and
// shares the rendered bytes between the group-version documents.
type generator struct {
	byName map[string]*component
	byType map[reflect.Type]*component
	// gvks lists the group-version-kinds served with each Go type; they become
	// the x-kubernetes-group-version-kind extension of its component.
	gvks map[reflect.Type][]schema.GroupVersionKind
}

func newGenerator() *generator {
	return &generator{
		byName: map[string]*component{},
		byType: map[reflect.Type]*component{},
		gvks:   map[reflect.Type][]schema.GroupVersionKind{},
	}
}

// addGVK records that the Go type t is served as gvk. It must be called
// before the type's component is rendered.
func (g *generator) addGVK(t reflect.Type, gvk schema.GroupVersionKind) {
	for _, have := range g.gvks[t] {
		if have == gvk {
			return
		}
	}
	g.gvks[t] = append(g.gvks[t], gvk)
}

// componentName derives the upstream definition name of a named Go type from
// its package path: k8s.io/api/apps/v1.Deployment becomes
// io.k8s.api.apps.v1.Deployment (the host name is reversed, slashes become
// dots).
func componentName(t reflect.Type) string {
	pkg := t.PkgPath()
	host, rest, _ := strings.Cut(pkg, "/")
	labels := strings.Split(host, ".")
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	parts := []string{strings.Join(labels, ".")}
	if rest != "" {
		parts = append(parts, strings.ReplaceAll(rest, "/", "."))
	}
	parts = append(parts, t.Name())
	return strings.Join(parts, ".")
}

// isComponent reports whether t is rendered as a named component (and
// referenced with $ref) rather than inlined. Named structs and the types that
// declare their own OpenAPI type are components; named scalars, slices and
// maps (corev1.Protocol, corev1.ResourceList, ...) are inlined as their
// underlying type, as upstream does.
func isComponent(t reflect.Type) bool {
	if t.Name() == "" || t.PkgPath() == "" {
		return false
	}
	if t.Kind() == reflect.Struct {
		return true
	}
	return implements[schemaTyper](t) || implements[oneOfTyper](t)
}

// ref returns the component for the named type t, rendering it (and,
// recursively, everything it references) on first use. A type is registered
// before its fields are walked, so recursive types terminate.
func (g *generator) ref(t reflect.Type) (*component, error) {
	if c, ok := g.byType[t]; ok {
		return c, nil
	}
	name := componentName(t)
	if other, ok := g.byName[name]; ok && other.typ != t {
		return nil, fmt.Errorf("types %v and %v both map to component %q", other.typ, t, name)
	}
	c := &component{name: name, typ: t}
	g.byType[t] = c
	g.byName[name] = c

	deps := map[string]bool{}
	s, err := g.componentSchema(t, deps)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", name, err)
	}
	if gvks := g.gvks[t]; len(gvks) > 0 {
		s["x-kubernetes-group-version-kind"] = gvkExtensionList(gvks)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", name, err)
	}
	c.raw = raw
	c.deps = sortedKeys(deps)
	return c, nil
}

// gvkExtensionList renders the list form of x-kubernetes-group-version-kind
// used on schemas, sorted for determinism.
func gvkExtensionList(gvks []schema.GroupVersionKind) []map[string]string {
	sorted := append([]schema.GroupVersionKind(nil), gvks...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Kind < b.Kind
	})
	out := make([]map[string]string, 0, len(sorted))
	for _, gvk := range sorted {
		out = append(out, gvkExtension(gvk))
	}
	return out
}

// gvkExtension is the object form of x-kubernetes-group-version-kind used on
// operations (and, in a list, on schemas). kubectl compares these maps with
// reflect.DeepEqual, so both forms must carry exactly these three keys.
func gvkExtension(gvk schema.GroupVersionKind) map[string]string {
	return map[string]string{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}
}

// swaggerDoc returns the documentation map of t ("" is the type description,
// other keys are JSON field names), or nil.
func swaggerDoc(t reflect.Type) map[string]string {
	if t.Name() == "" || !implements[swaggerDocer](t) {
		return nil
	}
	return as[swaggerDocer](t).SwaggerDoc()
}

// componentSchema renders the body of the component for t.
func (g *generator) componentSchema(t reflect.Type, deps map[string]bool) (map[string]any, error) {
	doc := swaggerDoc(t)
	s := map[string]any{}
	switch {
	case implements[oneOfTyper](t):
		// Quantity (string|number) and IntOrString (integer|string).
		types := as[oneOfTyper](t).OpenAPIV3OneOfTypes()
		oneOf := make([]map[string]any, 0, len(types))
		for _, typ := range types {
			oneOf = append(oneOf, map[string]any{"type": typ})
		}
		s["oneOf"] = oneOf
		if f := schemaFormatOf(t); f != "" {
			s["format"] = f
		}
		if sameSet(types, []string{"integer", "string"}) {
			s["x-kubernetes-int-or-string"] = true
		}
	case implements[schemaTyper](t):
		// Time, MicroTime, Duration: serialised as a scalar.
		if types := as[schemaTyper](t).OpenAPISchemaType(); len(types) > 0 {
			s["type"] = types[0]
		}
		if f := schemaFormatOf(t); f != "" {
			s["format"] = f
		}
	case t == reflect.TypeFor[metav1.GroupVersion]():
		// Marshals itself as "group/version".
		s["type"] = "string"
	case isPlainObject(t):
		props, err := g.structProperties(t, doc, deps)
		if err != nil {
			return nil, err
		}
		s["type"] = "object"
		if len(props) > 0 {
			s["properties"] = props
		}
	default:
		// Structs with their own JSON encoding (RawExtension, FieldsV1):
		// opaque objects, as upstream declares them.
		s["type"] = "object"
	}
	d := doc[""]
	if d == "" {
		d = builtinDescription(t)
	}
	if d != "" {
		s["description"] = d
	}
	return s, nil
}

// builtinDescription documents the apimachinery types that have no
// SwaggerDoc method (their upstream descriptions come from Go comments).
func builtinDescription(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[resource.Quantity]():
		return "Quantity is a fixed-point representation of a number, serialized as a string such as \"100m\", \"1.5Gi\" or \"2e3\". " +
			"It is a decimal number (up to 3 fractional digits, an optional sign) followed by a suffix: a binary SI suffix " +
			"(Ki, Mi, Gi, Ti, Pi, Ei), a decimal SI suffix (n, u, m, \"\", k, M, G, T, P, E) or a decimal exponent (e3, E6). " +
			"Values are canonicalized on output; a plain number is also accepted on input."
	case reflect.TypeFor[intstr.IntOrString]():
		return "IntOrString is a value that is either a 32-bit integer or a string, such as a port number or a port name, " +
			"or an absolute number or a percentage (\"25%\")."
	case reflect.TypeFor[metav1.Time]():
		return "Time is a timestamp serialized as an RFC 3339 string with second precision, e.g. \"2024-01-02T15:04:05Z\"."
	case reflect.TypeFor[metav1.MicroTime]():
		return "MicroTime is a timestamp serialized as an RFC 3339 string with microsecond precision, e.g. \"2024-01-02T15:04:05.000000Z\"."
	case reflect.TypeFor[metav1.Duration]():
		return "Duration is a length of time serialized as a Go duration string, e.g. \"1h30m\" or \"10s\"."
	case reflect.TypeFor[runtime.RawExtension]():
		return "RawExtension holds an embedded JSON object of another API type; it carries its own apiVersion and kind."
	}
	return ""
}

func schemaFormatOf(t reflect.Type) string {
	if !implements[schemaFormat](t) {
		return ""
	}
	return as[schemaFormat](t).OpenAPISchemaFormat()
}

// jsonTag is a parsed `json:"..."` struct tag.
type jsonTag struct {
	name      string
	omitEmpty bool
	inline    bool
	asString  bool
}

func parseJSONTag(tag string) jsonTag {
	name, opts, _ := strings.Cut(tag, ",")
	jt := jsonTag{name: name}
	for opt := range strings.SplitSeq(opts, ",") {
		switch opt {
		case "omitempty", "omitzero":
			jt.omitEmpty = true
		case "inline":
			jt.inline = true
		case "string":
			jt.asString = true
		}
	}
	return jt
}

// structProperties renders the properties of struct t following
// encoding/json's rules: fields tagged "-" and unexported fields are skipped,
// embedded structs without a JSON name (TypeMeta, ObjectMeta with
// `json:",inline"`) are flattened into the parent, and fields of the outer
// struct win over promoted ones.
func (g *generator) structProperties(t reflect.Type, doc map[string]string, deps map[string]bool) (map[string]any, error) {
	props := map[string]any{}
	promoted := map[string]any{}
	for i := range t.NumField() {
		f := t.Field(i)
		tagText, hasTag := f.Tag.Lookup("json")
		if tagText == "-" {
			continue
		}
		tag := parseJSONTag(tagText)
		ft := f.Type
		et := ft
		if et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		if (f.Anonymous && tag.name == "" && et.Kind() == reflect.Struct) || (tag.inline && tag.name == "" && et.Kind() == reflect.Struct) {
			sub, err := g.structProperties(et, swaggerDoc(et), deps)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", f.Name, err)
			}
			for k, v := range sub {
				if _, ok := promoted[k]; !ok {
					promoted[k] = v
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		name := tag.name
		if !hasTag || name == "" {
			name = f.Name
		}
		ps, err := g.propertySchema(f, tag, doc[name], deps)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Name, err)
		}
		props[name] = ps
	}
	for k, v := range promoted {
		if _, ok := props[k]; !ok {
			props[k] = v
		}
	}
	return props, nil
}

// propertySchema renders one struct field: its type schema plus description,
// zero-value default and the strategic-merge-patch extensions from the
// patchStrategy/patchMergeKey struct tags.
func (g *generator) propertySchema(f reflect.StructField, tag jsonTag, description string, deps map[string]bool) (map[string]any, error) {
	var s map[string]any
	if tag.asString && isScalar(f.Type) {
		s = map[string]any{"type": "string"}
	} else {
		var err error
		if s, err = g.typeSchema(f.Type, deps); err != nil {
			return nil, err
		}
	}
	extra := map[string]any{}
	if description != "" {
		extra["description"] = description
	}
	if def, ok := zeroDefault(f.Type, tag.omitEmpty); ok {
		extra["default"] = def
	}
	if v := f.Tag.Get("patchStrategy"); v != "" {
		extra["x-kubernetes-patch-strategy"] = v
	}
	if v := f.Tag.Get("patchMergeKey"); v != "" {
		extra["x-kubernetes-patch-merge-key"] = v
	}
	return withSiblings(s, extra), nil
}

// withSiblings adds keys to a schema. OpenAPI 3.0 ignores the siblings of a
// $ref, so a reference that gets siblings is wrapped as allOf: [{$ref}], the
// shape upstream uses and kubectl explain understands.
func withSiblings(s map[string]any, extra map[string]any) map[string]any {
	if len(extra) == 0 {
		return s
	}
	if ref, ok := s["$ref"]; ok && len(s) == 1 {
		s = map[string]any{"allOf": []map[string]any{{"$ref": ref}}}
	}
	for k, v := range extra {
		s[k] = v
	}
	return s
}

// zeroDefault returns the default upstream declares for a non-pointer value
// of type t: the empty object for plain structs, and the zero value for
// scalars that are always serialised (no omitempty).
func zeroDefault(t reflect.Type, omitEmpty bool) (any, bool) {
	if t.Kind() == reflect.Pointer {
		return nil, false
	}
	if isComponent(t) {
		if isPlainObject(t) {
			return map[string]any{}, true
		}
		return nil, false
	}
	if omitEmpty {
		return nil, false
	}
	switch t.Kind() {
	case reflect.String:
		return "", true
	case reflect.Bool:
		return false, true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return 0, true
	}
	return nil, false
}

func isScalar(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// typeSchema renders the schema of a value of type t: a $ref for component
// types, an inline schema otherwise. Referenced components are recorded in
// deps.
func (g *generator) typeSchema(t reflect.Type, deps map[string]bool) (map[string]any, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isComponent(t) {
		c, err := g.ref(t)
		if err != nil {
			return nil, err
		}
		deps[c.name] = true
		return map[string]any{"$ref": schemaRefPrefix + c.name}, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}, nil
	case reflect.String:
		return map[string]any{"type": "string"}, nil
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return map[string]any{"type": "integer", "format": "int32"}, nil
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64:
		return map[string]any{"type": "integer", "format": "int64"}, nil
	case reflect.Float32:
		return map[string]any{"type": "number", "format": "float"}, nil
	case reflect.Float64:
		return map[string]any{"type": "number", "format": "double"}, nil
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			// encoding/json writes []byte as base64.
			return map[string]any{"type": "string", "format": "byte"}, nil
		}
		items, err := g.elemSchema(t.Elem(), deps)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "array", "items": items}, nil
	case reflect.Map:
		values, err := g.elemSchema(t.Elem(), deps)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "object", "additionalProperties": values}, nil
	case reflect.Struct:
		// An anonymous struct: inline object.
		props, err := g.structProperties(t, nil, deps)
		if err != nil {
			return nil, err
		}
		s := map[string]any{"type": "object"}
		if len(props) > 0 {
			s["properties"] = props
		}
		return s, nil
	case reflect.Interface:
		// Any JSON value.
		return map[string]any{}, nil
	}
	return nil, fmt.Errorf("unsupported Go type %v (kind %v)", t, t.Kind())
}

// elemSchema renders the items of an array or the values of a map; a
// non-pointer element always serialises, so it gets its zero default.
func (g *generator) elemSchema(t reflect.Type, deps map[string]bool) (map[string]any, error) {
	s, err := g.typeSchema(t, deps)
	if err != nil {
		return nil, err
	}
	if def, ok := zeroDefault(t, false); ok {
		s = withSiblings(s, map[string]any{"default": def})
	}
	return s, nil
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]bool{}
	for _, s := range a {
		seen[s] = true
	}
	for _, s := range b {
		if !seen[s] {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
