package openapi

import (
	"bytes"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// parsedDoc is a decoded group-version document with lookup helpers.
type parsedDoc struct {
	t       *testing.T
	raw     map[string]any
	schemas map[string]any
	paths   map[string]any
}

func buildTestDocs(t *testing.T) *Documents {
	t.Helper()
	d, err := Build(testResources())
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return d
}

func parseDoc(t *testing.T, d *Documents, path string) *parsedDoc {
	t.Helper()
	body, _, ok := d.GroupVersion(path)
	if !ok {
		t.Fatalf("no document for %s", path)
	}
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("document %s is not JSON: %v", path, err)
	}
	p := &parsedDoc{t: t, raw: raw}
	p.schemas = raw["components"].(map[string]any)["schemas"].(map[string]any)
	p.paths = raw["paths"].(map[string]any)
	return p
}

func (p *parsedDoc) schema(name string) map[string]any {
	p.t.Helper()
	s, ok := p.schemas[name].(map[string]any)
	if !ok {
		p.t.Fatalf("component %s missing", name)
	}
	return s
}

// resolve follows a $ref or a single-element allOf wrapper to a component.
func (p *parsedDoc) resolve(s map[string]any) map[string]any {
	p.t.Helper()
	if ref, ok := s["$ref"].(string); ok {
		return p.schema(strings.TrimPrefix(ref, schemaRefPrefix))
	}
	if all, ok := s["allOf"].([]any); ok && len(all) == 1 {
		return p.resolve(all[0].(map[string]any))
	}
	return s
}

// field walks a dotted field path from a component, through refs, arrays
// and maps, and returns the property schema of the last element.
func (p *parsedDoc) field(component, path string) map[string]any {
	p.t.Helper()
	cur := p.schema(component)
	var prop map[string]any
	for _, name := range strings.Split(path, ".") {
		cur = p.resolve(cur)
		for {
			if items, ok := cur["items"].(map[string]any); ok {
				cur = p.resolve(items)
				continue
			}
			break
		}
		props, _ := cur["properties"].(map[string]any)
		next, ok := props[name].(map[string]any)
		if !ok {
			p.t.Fatalf("%s: no property %q on the way to %s", component, name, path)
		}
		prop, cur = next, next
	}
	return prop
}

func (p *parsedDoc) operation(path, method string) map[string]any {
	p.t.Helper()
	item, ok := p.paths[path].(map[string]any)
	if !ok {
		p.t.Fatalf("path %s missing", path)
	}
	op, ok := item[method].(map[string]any)
	if !ok {
		p.t.Fatalf("no %s operation on %s", method, path)
	}
	return op
}

func paramNames(op map[string]any) map[string]bool {
	out := map[string]bool{}
	for _, p := range op["parameters"].([]any) {
		out[p.(map[string]any)["name"].(string)] = true
	}
	return out
}

func TestDeploymentSchema(t *testing.T) {
	doc := parseDoc(t, buildTestDocs(t), "apis/apps/v1")
	if doc.raw["openapi"] != "3.0.0" {
		t.Errorf("openapi = %v, want 3.0.0", doc.raw["openapi"])
	}
	dep := doc.schema("io.k8s.api.apps.v1.Deployment")
	gvks, _ := dep["x-kubernetes-group-version-kind"].([]any)
	want := map[string]any{"group": "apps", "version": "v1", "kind": "Deployment"}
	if len(gvks) != 1 || fmt.Sprint(gvks[0]) != fmt.Sprint(want) {
		t.Errorf("Deployment GVK extension = %v, want [%v]", gvks, want)
	}
	if dep["description"] == "" || dep["type"] != "object" {
		t.Errorf("Deployment schema lacks description/type: %v", dep)
	}
	props := dep["properties"].(map[string]any)
	for _, name := range []string{"apiVersion", "kind", "metadata", "spec", "status"} {
		if props[name] == nil {
			t.Errorf("Deployment lacks property %q (inlined TypeMeta?)", name)
		}
	}
	if props["TypeMeta"] != nil || props["typeMeta"] != nil {
		t.Error("TypeMeta was not inlined")
	}
	if _, ok := dep["required"]; ok {
		t.Error("Deployment has a required list; apiVersion/kind must never be required")
	}

	meta := props["metadata"].(map[string]any)
	if meta["description"] == nil || meta["$ref"] != nil {
		t.Errorf("metadata should be allOf-wrapped with a description, got %v", meta)
	}
	if got := doc.resolve(meta); !strings.Contains(fmt.Sprint(got["description"]), "ObjectMeta is metadata") {
		t.Errorf("ObjectMeta description = %v", got["description"])
	}

	containers := doc.field("io.k8s.api.apps.v1.Deployment", "spec.template.spec.containers")
	if containers["type"] != "array" || containers["x-kubernetes-patch-merge-key"] != "name" ||
		containers["x-kubernetes-patch-strategy"] != "merge" {
		t.Errorf("containers = %v, want array with patch merge key name and strategy merge", containers)
	}
	if got := doc.resolve(containers["items"].(map[string]any)); got["properties"].(map[string]any)["image"] == nil {
		t.Error("containers items do not resolve to Container")
	}
	if retain := doc.field("io.k8s.api.core.v1.PodSpec", "volumes"); retain["x-kubernetes-patch-strategy"] != "merge,retainKeys" {
		t.Errorf("volumes patch strategy = %v, want merge,retainKeys", retain["x-kubernetes-patch-strategy"])
	}

	replicas := doc.field("io.k8s.api.apps.v1.Deployment", "spec.replicas")
	if replicas["type"] != "integer" || replicas["format"] != "int32" {
		t.Errorf("replicas = %v, want integer/int32", replicas)
	}
	if ads := doc.field("io.k8s.api.core.v1.PodSpec", "activeDeadlineSeconds"); ads["format"] != "int64" {
		t.Errorf("activeDeadlineSeconds = %v, want int64", ads)
	}
	if paused := doc.field("io.k8s.api.apps.v1.DeploymentSpec", "paused"); paused["type"] != "boolean" {
		t.Errorf("paused = %v, want boolean", paused)
	}
	labels := doc.field("io.k8s.api.apps.v1.Deployment", "metadata.labels")
	if labels["type"] != "object" || labels["additionalProperties"].(map[string]any)["type"] != "string" {
		t.Errorf("labels = %v, want map of strings", labels)
	}
	if ts := doc.field("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "creationTimestamp"); ts["description"] == nil {
		t.Errorf("creationTimestamp lacks its field description: %v", ts)
	}
}

func TestSpecialTypes(t *testing.T) {
	docs := buildTestDocs(t)
	apps := parseDoc(t, docs, "apis/apps/v1")
	core := parseDoc(t, docs, "api/v1")

	q := apps.schema("io.k8s.apimachinery.pkg.api.resource.Quantity")
	if fmt.Sprint(q["oneOf"]) != "[map[type:string] map[type:number]]" || q["description"] == nil {
		t.Errorf("Quantity = %v, want oneOf string/number with description", q)
	}
	limits := apps.field("io.k8s.api.core.v1.Container", "resources.limits")
	if limits["additionalProperties"].(map[string]any)["$ref"] != schemaRefPrefix+"io.k8s.apimachinery.pkg.api.resource.Quantity" {
		t.Errorf("resources.limits = %v, want map of Quantity", limits)
	}

	ios := apps.schema("io.k8s.apimachinery.pkg.util.intstr.IntOrString")
	if ios["x-kubernetes-int-or-string"] != true || ios["format"] != "int-or-string" ||
		fmt.Sprint(ios["oneOf"]) != "[map[type:integer] map[type:string]]" {
		t.Errorf("IntOrString = %v", ios)
	}
	maxSurge := apps.field("io.k8s.api.apps.v1.DeploymentSpec", "strategy.rollingUpdate.maxSurge")
	if apps.resolve(maxSurge)["x-kubernetes-int-or-string"] != true {
		t.Errorf("maxSurge = %v, want IntOrString", maxSurge)
	}

	for _, name := range []string{"io.k8s.apimachinery.pkg.apis.meta.v1.Time", "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"} {
		s := core.schema(name)
		if s["type"] != "string" || s["format"] != "date-time" || s["description"] == nil {
			t.Errorf("%s = %v, want string/date-time with description", name, s)
		}
	}
	raw := apps.schema("io.k8s.apimachinery.pkg.runtime.RawExtension")
	if raw["type"] != "object" || raw["properties"] != nil {
		t.Errorf("RawExtension = %v, want opaque object", raw)
	}
	if fields := core.schema("io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1"); fields["type"] != "object" || fields["properties"] != nil {
		t.Errorf("FieldsV1 = %v, want opaque object", fields)
	}
	if uid := core.field("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "uid"); uid["type"] != "string" {
		t.Errorf("uid (types.UID) = %v, want string", uid)
	}
	secretData := core.field("io.k8s.api.core.v1.Secret", "data")
	if v := secretData["additionalProperties"].(map[string]any); v["type"] != "string" || v["format"] != "byte" {
		t.Errorf("Secret.data = %v, want map of base64 strings", secretData)
	}
	if proto := core.field("io.k8s.api.core.v1.ContainerPort", "protocol"); proto["type"] != "string" {
		t.Errorf("protocol (named string) = %v, want inline string", proto)
	}
	if _, ok := core.schemas["io.k8s.api.core.v1.Protocol"]; ok {
		t.Error("named scalar types must be inlined, not components")
	}
}

// walk visits every JSON object in v.
func walk(v any, visit func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		visit(x)
		for _, e := range x {
			walk(e, visit)
		}
	case []any:
		for _, e := range x {
			walk(e, visit)
		}
	}
}

func TestDocumentsAreSelfContained(t *testing.T) {
	docs := buildTestDocs(t)
	for _, path := range docs.Paths() {
		doc := parseDoc(t, docs, path)
		refs := 0
		walk(doc.raw, func(m map[string]any) {
			ref, ok := m["$ref"].(string)
			if !ok {
				return
			}
			refs++
			if len(m) != 1 {
				t.Errorf("%s: $ref %s has siblings %v (must be allOf-wrapped)", path, ref, m)
			}
			name, found := strings.CutPrefix(ref, schemaRefPrefix)
			if !found {
				t.Errorf("%s: $ref %q is not a component reference", path, ref)
			} else if _, ok := doc.schemas[name]; !ok {
				t.Errorf("%s: $ref %q does not resolve", path, ref)
			}
		})
		if refs == 0 {
			t.Errorf("%s: no references at all", path)
		}
		walk(doc.raw["components"], func(m map[string]any) {
			if _, ok := m["required"]; ok {
				t.Errorf("%s: unexpected required list %v", path, m["required"])
			}
		})
	}
}

func TestRootAndHashes(t *testing.T) {
	docs := buildTestDocs(t)
	var root struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(docs.Root(), &root); err != nil {
		t.Fatalf("root is not JSON: %v", err)
	}
	want := []string{"api/v1", "apis/apps/v1", "apis/batch/v1", "apis/coordination.k8s.io/v1", "apis/rbac.authorization.k8s.io/v1"}
	if fmt.Sprint(docs.Paths()) != fmt.Sprint(want) {
		t.Errorf("Paths() = %v, want %v", docs.Paths(), want)
	}
	if len(root.Paths) != len(want) {
		t.Errorf("root lists %d group-versions, want %d", len(root.Paths), len(want))
	}
	for _, path := range want {
		body, hash, ok := docs.GroupVersion(path)
		if !ok {
			t.Fatalf("GroupVersion(%q) not found", path)
		}
		if sum := fmt.Sprintf("%X", sha512.Sum512(body)); hash != sum {
			t.Errorf("%s: hash %s is not the SHA-512 of the document", path, hash)
		}
		if got, wantURL := root.Paths[path].ServerRelativeURL, "/openapi/v3/"+path+"?hash="+hash; got != wantURL {
			t.Errorf("root[%s] = %q, want %q", path, got, wantURL)
		}
		if _, _, ok := docs.GroupVersion("/" + path); !ok {
			t.Errorf("GroupVersion(%q) with a leading slash not found", "/"+path)
		}
	}
	if _, _, ok := docs.GroupVersion("apis/nothing/v1"); ok {
		t.Error("unknown group-version found")
	}

	again := buildTestDocs(t)
	if !bytes.Equal(docs.Root(), again.Root()) {
		t.Error("Root is not deterministic")
	}
	for _, path := range want {
		a, _, _ := docs.GroupVersion(path)
		b, _, _ := again.GroupVersion(path)
		if !bytes.Equal(a, b) {
			t.Errorf("%s is not deterministic", path)
		}
	}
}

func TestOperations(t *testing.T) {
	docs := buildTestDocs(t)
	apps := parseDoc(t, docs, "apis/apps/v1")
	core := parseDoc(t, docs, "api/v1")
	const item = "/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
	const collection = "/apis/apps/v1/namespaces/{namespace}/deployments"

	wantOps := map[string]struct{ path, method, action, id string }{
		"list":     {collection, "get", "list", "listAppsV1NamespacedDeployment"},
		"all":      {"/apis/apps/v1/deployments", "get", "list", "listAppsV1DeploymentForAllNamespaces"},
		"create":   {collection, "post", "post", "createAppsV1NamespacedDeployment"},
		"delcoll":  {collection, "delete", "deletecollection", "deleteAppsV1CollectionNamespacedDeployment"},
		"read":     {item, "get", "get", "readAppsV1NamespacedDeployment"},
		"replace":  {item, "put", "put", "replaceAppsV1NamespacedDeployment"},
		"patch":    {item, "patch", "patch", "patchAppsV1NamespacedDeployment"},
		"delete":   {item, "delete", "delete", "deleteAppsV1NamespacedDeployment"},
		"status":   {item + "/status", "patch", "patch", "patchAppsV1NamespacedDeploymentStatus"},
		"getScale": {item + "/scale", "get", "get", "readAppsV1NamespacedDeploymentScale"},
	}
	for label, w := range wantOps {
		op := apps.operation(w.path, w.method)
		if op["x-kubernetes-action"] != w.action || op["operationId"] != w.id {
			t.Errorf("%s: action %v id %v, want %s %s", label, op["x-kubernetes-action"], op["operationId"], w.action, w.id)
		}
	}

	patch := apps.operation(item, "patch")
	if gvk := patch["x-kubernetes-group-version-kind"]; fmt.Sprint(gvk) != "map[group:apps kind:Deployment version:v1]" {
		t.Errorf("patch GVK = %v", gvk)
	}
	names := paramNames(patch)
	for _, p := range []string{"name", "namespace", "fieldValidation", "dryRun", "fieldManager", "force"} {
		if !names[p] {
			t.Errorf("patch lacks parameter %s", p)
		}
	}
	content := patch["requestBody"].(map[string]any)["content"].(map[string]any)
	for _, ct := range []string{"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"} {
		if content[ct] == nil {
			t.Errorf("patch lacks content type %s", ct)
		}
	}
	for _, op := range []map[string]any{apps.operation(collection, "post"), apps.operation(item, "put")} {
		names := paramNames(op)
		for _, p := range []string{"fieldValidation", "dryRun", "fieldManager"} {
			if !names[p] {
				t.Errorf("%s lacks parameter %s", op["operationId"], p)
			}
		}
		if names["force"] {
			t.Errorf("%s must not take force", op["operationId"])
		}
		body := op["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
		if body["$ref"] != schemaRefPrefix+"io.k8s.api.apps.v1.Deployment" {
			t.Errorf("%s body = %v", op["operationId"], body)
		}
	}
	ok200 := apps.operation(item, "get")["responses"].(map[string]any)["200"].(map[string]any)
	if fmt.Sprint(ok200["content"]) != "map[application/json:map[schema:map[$ref:#/components/schemas/io.k8s.api.apps.v1.Deployment]]]" {
		t.Errorf("get 200 = %v", ok200)
	}

	scale := apps.operation(item+"/scale", "put")
	if fmt.Sprint(scale["x-kubernetes-group-version-kind"]) != "map[group:autoscaling kind:Scale version:v1]" {
		t.Errorf("scale GVK = %v", scale["x-kubernetes-group-version-kind"])
	}
	if gvks := apps.schema("io.k8s.api.autoscaling.v1.Scale")["x-kubernetes-group-version-kind"]; fmt.Sprint(gvks) != "[map[group:autoscaling kind:Scale version:v1]]" {
		t.Errorf("Scale component GVK = %v", gvks)
	}
	if gvks := apps.schema("io.k8s.api.apps.v1.DeploymentList")["x-kubernetes-group-version-kind"]; fmt.Sprint(gvks) != "[map[group:apps kind:DeploymentList version:v1]]" {
		t.Errorf("DeploymentList GVK = %v", gvks)
	}

	binding := core.operation("/api/v1/namespaces/{namespace}/pods/{name}/binding", "post")
	if binding["operationId"] != "createCoreV1NamespacedPodBinding" ||
		fmt.Sprint(binding["x-kubernetes-group-version-kind"]) != "map[group: kind:Binding version:v1]" {
		t.Errorf("binding = %v %v", binding["operationId"], binding["x-kubernetes-group-version-kind"])
	}
	logOp := core.operation("/api/v1/namespaces/{namespace}/pods/{name}/log", "get")
	if !paramNames(logOp)["follow"] || logOp["operationId"] != "readCoreV1NamespacedPodLog" {
		t.Errorf("log = %v", logOp)
	}
	exec := core.operation("/api/v1/namespaces/{namespace}/pods/{name}/exec", "post")
	if exec["x-kubernetes-action"] != "connect" || fmt.Sprint(exec["x-kubernetes-group-version-kind"]) != "map[group: kind:PodExecOptions version:v1]" {
		t.Errorf("exec = %v", exec)
	}
	nsRead := core.operation("/api/v1/namespaces/{name}", "get")
	if nsRead["operationId"] != "readCoreV1Namespace" || paramNames(nsRead)["namespace"] {
		t.Errorf("cluster-scoped read = %v", nsRead)
	}
	core.operation("/api/v1/nodes/{name}/proxy/{path}", "get")
	// Verbs restricts the documented operations.
	if item, ok := core.paths["/api/v1/namespaces/{namespace}/bindings"].(map[string]any); !ok || len(item) != 1 || item["post"] == nil {
		t.Errorf("create-only bindings documented as %v", core.paths["/api/v1/namespaces/{namespace}/bindings"])
	}
	if _, ok := core.paths["/api/v1/namespaces/{namespace}/bindings/{name}"]; ok {
		t.Error("create-only bindings got an item path")
	}

	// Every operation carries the kubectl extensions; ids are unique; no
	// operation offers strategic merge patch.
	for _, path := range docs.Paths() {
		doc := parseDoc(t, docs, path)
		ids := map[string]bool{}
		for p, item := range doc.paths {
			for method, op := range item.(map[string]any) {
				o := op.(map[string]any)
				id, _ := o["operationId"].(string)
				if ids[id] {
					t.Errorf("%s: duplicate operationId %s", path, id)
				}
				ids[id] = true
				if strings.HasSuffix(p, "/") {
					continue // the discovery path
				}
				gvk, _ := o["x-kubernetes-group-version-kind"].(map[string]any)
				if len(gvk) != 3 || o["x-kubernetes-action"] == nil {
					t.Errorf("%s %s %s lacks extensions", path, method, p)
				}
				if method == "patch" && !paramNames(o)["fieldValidation"] {
					t.Errorf("%s %s lacks fieldValidation", path, p)
				}
				if rb, ok := o["requestBody"].(map[string]any); ok {
					if rb["content"].(map[string]any)["application/strategic-merge-patch+json"] != nil {
						t.Errorf("%s %s %s offers strategic merge patch", path, method, p)
					}
				}
			}
		}
	}
}

// recursiveObject exercises cycles, skipped fields and non-k8s.io names.
type recursiveObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              treeNode `json:"spec"`
	Ratio             float64  `json:"ratio"`
	Hidden            string   `json:"-"`
	unexported        string
	Anonymous         struct {
		Count int32 `json:"count,omitempty"`
	} `json:"anonymous"`
}

type treeNode struct {
	Name     string     `json:"name"`
	Children []treeNode `json:"children,omitempty"`
	Parent   *treeNode  `json:"parent,omitempty"`
}

func (o *recursiveObject) DeepCopyObject() runtime.Object {
	c := *o
	return &c
}

type recursiveObjectList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []recursiveObject `json:"items"`
}

func (o *recursiveObjectList) DeepCopyObject() runtime.Object {
	c := *o
	return &c
}

func TestRecursiveTypes(t *testing.T) {
	_ = recursiveObject{}.unexported
	docs, err := Build([]Resource{{
		GVK:    schema.GroupVersionKind{Group: "example.kubette.io", Version: "v1alpha1", Kind: "Tree"},
		Plural: "trees", Namespaced: true,
		Object: &recursiveObject{}, List: &recursiveObjectList{},
	}})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	doc := parseDoc(t, docs, "apis/example.kubette.io/v1alpha1")
	const prefix = "com.github.kubette.kubette.internal.openapi."
	node := doc.schema(prefix + "treeNode")
	props := node["properties"].(map[string]any)
	if fmt.Sprint(props["parent"]) != "map[$ref:#/components/schemas/"+prefix+"treeNode]" {
		t.Errorf("parent = %v, want a self reference", props["parent"])
	}
	obj := doc.schema(prefix + "recursiveObject")
	op := obj["properties"].(map[string]any)
	for _, name := range []string{"Hidden", "hidden", "unexported"} {
		if op[name] != nil {
			t.Errorf("field %s must be skipped", name)
		}
	}
	if ratio := op["ratio"].(map[string]any); ratio["type"] != "number" || ratio["format"] != "double" {
		t.Errorf("ratio = %v", ratio)
	}
	anon := op["anonymous"].(map[string]any)
	if anon["type"] != "object" || anon["properties"].(map[string]any)["count"] == nil {
		t.Errorf("anonymous struct = %v", anon)
	}
	if gvk := obj["x-kubernetes-group-version-kind"]; fmt.Sprint(gvk) != "[map[group:example.kubette.io kind:Tree version:v1alpha1]]" {
		t.Errorf("GVK = %v", gvk)
	}
	if doc.operation("/apis/example.kubette.io/v1alpha1/namespaces/{namespace}/trees/{name}", "get")["operationId"] != "readExampleKubetteIoV1alpha1NamespacedTree" {
		t.Error("unexpected operationId for a custom group")
	}
}

func TestBuildErrors(t *testing.T) {
	dep := Resource{GVK: appsv1.SchemeGroupVersion.WithKind("Deployment"), Plural: "deployments", Namespaced: true,
		Object: &appsv1.Deployment{}, List: &appsv1.DeploymentList{}}
	cases := map[string]func(r *Resource){
		"unknown subresource": func(r *Resource) { r.Subresources = []string{"frobnicate"} },
		"nil object":          func(r *Resource) { r.Object = nil },
		"no plural":           func(r *Resource) { r.Plural = "" },
		"no kind":             func(r *Resource) { r.GVK.Kind = "" },
	}
	for name, mutate := range cases {
		r := dep
		mutate(&r)
		if _, err := Build([]Resource{r}); err == nil {
			t.Errorf("%s: Build succeeded, want an error", name)
		}
	}
	if _, err := Build([]Resource{dep, {GVK: corev1.SchemeGroupVersion.WithKind("Pod"), Plural: "pods", Object: &corev1.Pod{}}}); err != nil {
		t.Errorf("Build without a list type: %v", err)
	}
}

func TestServeHTTP(t *testing.T) {
	docs := buildTestDocs(t)
	srv := httptest.NewServer(docs)
	defer srv.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, header ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	_, hash, _ := docs.GroupVersion("apis/apps/v1")

	if resp := get("/openapi/v3"); resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("root: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	resp := get("/openapi/v3/apis/apps/v1?hash=" + hash)
	if resp.StatusCode != 200 || resp.Header.Get("ETag") != `"`+hash+`"` || !strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
		t.Errorf("doc: %d etag %s cache %s", resp.StatusCode, resp.Header.Get("ETag"), resp.Header.Get("Cache-Control"))
	}
	if resp := get("/openapi/v3/apis/apps/v1?hash=stale"); resp.StatusCode != http.StatusMovedPermanently ||
		resp.Header.Get("Location") != "/openapi/v3/apis/apps/v1?hash="+hash {
		t.Errorf("stale hash: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := get("/openapi/v3/apis/apps/v1", "If-None-Match", `"`+hash+`"`); resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", resp.StatusCode)
	}
	if resp := get("/openapi/v3/apis/apps/v1", "Accept", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"); resp.StatusCode != http.StatusNotAcceptable {
		t.Errorf("protobuf accept: %d", resp.StatusCode)
	}
	if resp := get("/openapi/v3/apis/apps/v1", "Accept", "application/json, */*"); resp.StatusCode != 200 {
		t.Errorf("json accept: %d", resp.StatusCode)
	}
	if resp := get("/openapi/v3/apis/nothing/v1"); resp.StatusCode != 404 {
		t.Errorf("unknown: %d", resp.StatusCode)
	}
	if resp := get("/openapi/v30"); resp.StatusCode != 404 {
		t.Errorf("prefix lookalike: %d", resp.StatusCode)
	}
}

func BenchmarkBuild(b *testing.B) {
	resources := testResources()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(resources); err != nil {
			b.Fatal(err)
		}
	}
}
