package openapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
)

// The media types of /openapi/v2: client-go's discovery client (and so kubectl and
// Helm) asks for the protobuf form by the name with "@"; the response names it in the
// dotted form, which, unlike the other, is a valid media type (client-go parses the
// Content-Type of every response), as kube-apiserver answers.
const (
	v2ProtoType       = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	v2ProtoTypeLegacy = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	v2DefinitionsRef  = "#/definitions/"
)

// v2Document is the Swagger 2.0 document of every group-version, built from the v3
// documents on first use (kube-apiserver builds its v2 document lazily too, and most
// clients never ask for it) and then kept.
type v2Document struct {
	once             sync.Once
	err              error
	json, protobuf   []byte
	jsonTag, protTag string
}

// V2 returns the /openapi/v2 document in JSON and in the protobuf encoding of
// gnostic's OpenAPI v2 model.
func (d *Documents) V2() (jsonDoc, protoDoc []byte, err error) {
	d.v2.once.Do(func() { d.v2.err = d.buildV2() })
	return d.v2.json, d.v2.protobuf, d.v2.err
}

// buildV2 merges the v3 group-version documents into one Swagger 2.0 document: the
// components become definitions, each operation's requestBody becomes a body
// parameter and its response contents a schema with produces and consumes.
func (d *Documents) buildV2() error {
	paths := map[string]any{}
	definitions := map[string]any{}
	for _, p := range d.Paths() {
		var doc struct {
			Paths      map[string]map[string]any `json:"paths"`
			Components struct {
				Schemas map[string]any `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(d.byPath[p].body, &doc); err != nil {
			return fmt.Errorf("openapi v2: read %s: %w", p, err)
		}
		for name, s := range doc.Components.Schemas {
			definitions[name] = v2Schema(s)
		}
		for path, item := range doc.Paths {
			out := map[string]any{}
			for method, op := range item {
				if ps, ok := op.([]any); ok && method == "parameters" {
					out[method] = v2Parameters(ps)
				} else if o, ok := op.(map[string]any); ok {
					out[method] = v2Operation(o)
				} else {
					out[method] = op
				}
			}
			paths[path] = out
		}
	}
	for name, def := range d.v2Definitions {
		definitions[name] = def
	}
	doc := map[string]any{
		"swagger":     "2.0",
		"info":        map[string]any{"title": "Kubernetes", "version": "unversioned"},
		"paths":       paths,
		"definitions": definitions,
		"securityDefinitions": map[string]any{
			"BearerToken": map[string]any{"type": "apiKey", "name": "authorization", "in": "header",
				"description": "Bearer Token authentication"},
		},
		"security": []any{map[string]any{"BearerToken": []any{}}},
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("openapi v2: encode: %w", err)
	}
	parsed, err := openapiv2.ParseDocument(body)
	if err != nil {
		return fmt.Errorf("openapi v2: the document does not parse as OpenAPI v2: %w", err)
	}
	pb, err := proto.MarshalOptions{Deterministic: true}.Marshal(parsed)
	if err != nil {
		return fmt.Errorf("openapi v2: protobuf: %w", err)
	}
	d.v2.json, d.v2.protobuf = body, pb
	d.v2.jsonTag, d.v2.protTag = hashOf(body), hashOf(pb)
	return nil
}

// v2Schema rewrites a v3 schema for Swagger 2.0: references point into definitions;
// allOf around a lone reference (v3's way to give a reference siblings) becomes the
// reference with its siblings, as upstream's v2 document has them; oneOf (Quantity,
// IntOrString) becomes the string the value is serialised as.
func v2Schema(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			switch k {
			case "properties", "patternProperties", "definitions":
				// A map of names to schemas: the names are data (a property may be
				// called "oneOf", "$ref" or "nullable"), the values are schemas.
				out[k] = v2SchemaMap(val)
			case "default", "example", "enum":
				out[k] = val // values, not schemas
			default:
				out[k] = v2Schema(val)
			}
		}
		if ref, ok := out["$ref"].(string); ok {
			out["$ref"] = v2DefinitionsRef + strings.TrimPrefix(ref, schemaRefPrefix)
		}
		if all, ok := out["allOf"].([]any); ok && len(all) == 1 {
			if m, ok := all[0].(map[string]any); ok && len(m) == 1 && m["$ref"] != nil {
				delete(out, "allOf")
				out["$ref"] = m["$ref"]
			}
		}
		if _, ok := out["oneOf"]; ok {
			delete(out, "oneOf")
			out["type"] = "string"
		}
		delete(out, "nullable")
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = v2Schema(val)
		}
		return out
	}
	return v
}

// v2SchemaMap rewrites each schema of a map from names to schemas.
func v2SchemaMap(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for name, s := range m {
		out[name] = v2Schema(s)
	}
	return out
}

// v2Operation rewrites one v3 operation: parameters carry their schema's type
// themselves, the request body is the parameter named body, and responses carry
// their schema with the content types listed in produces.
func v2Operation(op map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range op {
		switch k {
		case "parameters", "requestBody", "responses":
		default:
			out[k] = v
		}
	}
	ps, _ := op["parameters"].([]any)
	params := v2Parameters(ps)
	consumes := map[string]bool{}
	if body, ok := op["requestBody"].(map[string]any); ok {
		var s any
		if content, ok := body["content"].(map[string]any); ok {
			for mt, c := range content {
				consumes[mt] = true
				if cm, ok := c.(map[string]any); ok && s == nil {
					s = cm["schema"]
				}
			}
		}
		bp := map[string]any{"name": "body", "in": "body", "required": true}
		if s != nil {
			bp["schema"] = v2Schema(s)
		}
		params = append([]any{bp}, params...)
	}
	if len(params) > 0 {
		out["parameters"] = params
	}
	produces := map[string]bool{}
	if rs, ok := op["responses"].(map[string]any); ok {
		nr := map[string]any{}
		for code, r := range rs {
			rm, ok := r.(map[string]any)
			if !ok {
				continue
			}
			n := map[string]any{"description": rm["description"]}
			if content, ok := rm["content"].(map[string]any); ok {
				for mt, c := range content {
					produces[mt] = true
					if cm, ok := c.(map[string]any); ok && n["schema"] == nil && cm["schema"] != nil {
						n["schema"] = v2Schema(cm["schema"])
					}
				}
			}
			nr[code] = n
		}
		out["responses"] = nr
	}
	if len(consumes) > 0 {
		out["consumes"] = sortedSet(consumes)
	}
	if len(produces) > 0 {
		out["produces"] = sortedSet(produces)
	}
	out["schemes"] = []string{"https"}
	return out
}

// v2Parameters rewrites v3 parameters (of an operation or of a whole path) for
// Swagger 2.0: the type and format of a parameter are its own, not a schema's.
func v2Parameters(ps []any) []any {
	var params []any
	for _, p := range ps {
		pm, ok := p.(map[string]any)
		if !ok {
			continue
		}
		np := map[string]any{}
		for k, v := range pm {
			if k == "schema" {
				if s, ok := v.(map[string]any); ok {
					for sk, sv := range s {
						np[sk] = sv
					}
				}
				continue
			}
			np[k] = v
		}
		params = append(params, np)
	}
	return params
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ServeV2 serves /openapi/v2 as kube-apiserver does: the protobuf form to a client
// that asks for it, JSON to one that accepts JSON (or says nothing), 406 otherwise;
// an ETag per form, with If-None-Match.
func (d *Documents) ServeV2(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	jsonDoc, protoDoc, err := d.V2()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Cache-Control", "no-cache, private")
	w.Header().Set("Vary", "Accept")
	switch v2MediaType(r.Header.Values("Accept")) {
	case "protobuf":
		writeBody(w, r, protoDoc, d.v2.protTag, v2ProtoTypeLegacy)
	case "json":
		writeBody(w, r, jsonDoc, d.v2.jsonTag, "application/json")
	default:
		http.Error(w, "only application/json and "+v2ProtoType+" are served", http.StatusNotAcceptable)
	}
}

// v2MediaType picks the form of the v2 document for an Accept header: the first
// acceptable type in the client's order ("" when none is).
func v2MediaType(values []string) string {
	if len(values) == 0 {
		return "json"
	}
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case v2ProtoType, v2ProtoTypeLegacy:
				return "protobuf"
			case "", "application/json", "application/*", "*/*":
				return "json"
			}
		}
	}
	return ""
}
