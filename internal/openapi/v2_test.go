package openapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	openapiproto "k8s.io/kube-openapi/pkg/util/proto"
)

// TestV2Document: the merged Swagger 2.0 document has every kind as a definition
// with its group-version-kind, references into definitions only, and Quantity and
// IntOrString as strings, as upstream's.
func TestV2Document(t *testing.T) {
	jsonDoc, protoDoc, err := buildTestDocs(t).V2()
	if err != nil {
		t.Fatal(err)
	}
	if s := string(jsonDoc); strings.Contains(s, "#/components/") || strings.Contains(s, `"allOf"`) || strings.Contains(s, `"oneOf"`) {
		t.Fatalf("v3 constructs left in the v2 document")
	}
	var doc struct {
		Swagger     string                    `json:"swagger"`
		Paths       map[string]map[string]any `json:"paths"`
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(jsonDoc, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Swagger != "2.0" {
		t.Fatalf("swagger %q", doc.Swagger)
	}
	pod := doc.Definitions["io.k8s.api.core.v1.Pod"]
	if pod == nil {
		t.Fatalf("no Pod definition")
	}
	gvk, _ := json.Marshal(pod["x-kubernetes-group-version-kind"])
	if string(gvk) != `[{"group":"","kind":"Pod","version":"v1"}]` {
		t.Errorf("Pod gvk %s", gvk)
	}
	meta, _ := json.Marshal(pod["properties"].(map[string]any)["metadata"])
	if !strings.Contains(string(meta), `"$ref":"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"`) {
		t.Errorf("Pod metadata %s", meta)
	}
	if q := doc.Definitions["io.k8s.apimachinery.pkg.api.resource.Quantity"]; q["type"] != "string" {
		t.Errorf("Quantity %v", q)
	}
	if q := doc.Definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]; q["type"] != "string" || q["format"] != "int-or-string" {
		t.Errorf("IntOrString %v", q)
	}
	create := doc.Paths["/apis/apps/v1/namespaces/{namespace}/deployments"]["post"].(map[string]any)
	body := create["parameters"].([]any)[0].(map[string]any)
	if body["in"] != "body" || body["schema"].(map[string]any)["$ref"] != "#/definitions/io.k8s.api.apps.v1.Deployment" {
		t.Errorf("create's body parameter %v", body)
	}
	ns := create["parameters"].([]any)[1].(map[string]any)
	if ns["name"] != "namespace" || ns["in"] != "path" || ns["type"] != "string" {
		t.Errorf("create's namespace parameter %v", ns)
	}
	if r := create["responses"].(map[string]any)["201"].(map[string]any); r["schema"] == nil {
		t.Errorf("create's 201 response %v", r)
	}

	// The protobuf form is the same document, and the models kubectl's validation
	// builds from it know the kinds and their fields.
	var parsed openapiv2.Document
	if err := proto.Unmarshal(protoDoc, &parsed); err != nil {
		t.Fatal(err)
	}
	models, err := openapiproto.NewOpenAPIData(&parsed)
	if err != nil {
		t.Fatalf("kube-openapi refuses the document: %v", err)
	}
	deploy := models.LookupModel("io.k8s.api.apps.v1.Deployment")
	if deploy == nil {
		t.Fatal("no Deployment model")
	}
	kind, ok := deploy.(*openapiproto.Kind)
	if !ok {
		t.Fatalf("Deployment model is %T", deploy)
	}
	if _, ok := kind.Fields["spec"]; !ok {
		t.Errorf("Deployment model fields %v", kind.Keys())
	}
}

// TestServeV2: protobuf to a client asking for it (by either name), JSON to one that
// accepts JSON or says nothing, 406 to others, ETags per form.
func TestServeV2(t *testing.T) {
	d := buildTestDocs(t)
	get := func(accept, etag string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/openapi/v2", nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		if etag != "" {
			r.Header.Set("If-None-Match", etag)
		}
		w := httptest.NewRecorder()
		d.ServeV2(w, r)
		return w
	}
	for _, tc := range []struct{ accept, code, ctype string }{
		{"", "200", "application/json"},
		{"application/json", "200", "application/json"},
		{"application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json", "200", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"},
		{"application/com.github.proto-openapi.spec.v2.v1.0+protobuf", "200", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"},
		{"text/html", "406", ""},
	} {
		w := get(tc.accept, "")
		if got := http.StatusText(w.Code); w.Code != map[string]int{"200": 200, "406": 406}[tc.code] {
			t.Errorf("Accept %q: %d %s", tc.accept, w.Code, got)
			continue
		}
		if tc.ctype != "" && w.Header().Get("Content-Type") != tc.ctype {
			t.Errorf("Accept %q: Content-Type %q", tc.accept, w.Header().Get("Content-Type"))
		}
		if tc.code == "200" {
			if w2 := get(tc.accept, w.Header().Get("ETag")); w2.Code != http.StatusNotModified {
				t.Errorf("Accept %q: If-None-Match with the ETag gave %d", tc.accept, w2.Code)
			}
		}
	}
}

// TestV2SchemaPropertyNames: a property may be named like a schema keyword (the
// CRD kind's JSONSchemaProps has "oneOf", "$ref", "nullable" and "type"); only
// schemas are rewritten, never the names in a properties map or default values.
func TestV2SchemaPropertyNames(t *testing.T) {
	in := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"oneOf":    map[string]any{"type": "array", "items": map[string]any{"$ref": schemaRefPrefix + "x.Y"}},
			"nullable": map[string]any{"type": "boolean"},
			"$ref":     map[string]any{"type": "string"},
			"size":     map[string]any{"oneOf": []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}, "nullable": true},
			"spec":     map[string]any{"type": "object", "default": map[string]any{"oneOf": "kept", "nullable": true}},
		},
	}
	got, _ := json.Marshal(v2Schema(in))
	want := `{"properties":{"$ref":{"type":"string"},"nullable":{"type":"boolean"},"oneOf":{"items":{"$ref":"#/definitions/x.Y"},"type":"array"},` +
		`"size":{"type":"string"},"spec":{"default":{"nullable":true,"oneOf":"kept"},"type":"object"}},"type":"object"}`
	if string(got) != want {
		t.Errorf("v2Schema:\n got %s\nwant %s", got, want)
	}
}
