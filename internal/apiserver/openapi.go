package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	openapibuilder "k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/kubette/kubette/internal/openapi"
	"github.com/kubette/kubette/internal/registry"
)

// openAPIDocs serves /openapi/v3 from documents generated once at start-up, plus
// those of the custom resources served (rebuilt when a definition is installed or
// removed), and /openapi/v2 built from them on first use.
type openAPIDocs struct {
	base *openapi.Documents // the built-in resources'
	cur  atomic.Pointer[openapi.Documents]
	mu   sync.Mutex // serialises rebuilds
}

func newOpenAPIDocs(t *registry.Table) (*openAPIDocs, error) {
	var res []openapi.Resource
	for _, r := range t.All() {
		o := openapi.Resource{
			GVK: r.GroupVersionKind(), Plural: r.Plural, Namespaced: r.Namespaced,
			Object: r.New(), Subresources: r.Subresources, Verbs: r.Verbs,
		}
		if r.NewList != nil {
			o.List = r.NewList()
		}
		res = append(res, o)
	}
	d, err := openapi.Build(res)
	if err != nil {
		return nil, err
	}
	o := &openAPIDocs{base: d}
	o.cur.Store(d)
	return o, nil
}

// setCustom publishes the documents of the given definitions beside the built-in
// ones: one document per group-version, merged from upstream's builder
// (k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder) for each served
// version of each definition, as upstream's OpenAPI v3 controller publishes them.
func (o *openAPIDocs) setCustom(crds []*apiextensionsv1.CustomResourceDefinition) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	byGV := map[string][]*spec3.OpenAPI{}
	v2Defs := map[string]json.RawMessage{}
	var errs []error
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			doc, err := openapibuilder.BuildOpenAPIV3(crd, v.Name, openapibuilder.Options{V2: false})
			if err != nil {
				errs = append(errs, fmt.Errorf("openapi of %s %s: %w", crd.Name, v.Name, err))
				continue
			}
			path := "apis/" + crd.Spec.Group + "/" + v.Name
			byGV[path] = append(byGV[path], doc)
			// Upstream builds the v2 schema apart: kubectl's v2 validation cannot take
			// everything v3 says (x-kubernetes-preserve-unknown-fields objects are
			// published as a bare object, nullable and junctors dropped).
			v2, err := openapibuilder.BuildOpenAPIV2(crd, v.Name, openapibuilder.Options{V2: true})
			if err != nil {
				errs = append(errs, fmt.Errorf("openapi v2 of %s %s: %w", crd.Name, v.Name, err))
				continue
			}
			for name, def := range v2.Definitions {
				if strings.HasPrefix(name, "io.k8s.") {
					continue // the built-in types it refers to, which /openapi/v2 has already
				}
				if raw, err := json.Marshal(def); err == nil {
					v2Defs[name] = raw
				}
			}
		}
	}
	extra := map[string][]byte{}
	for path, docs := range byGV {
		merged, err := openapibuilder.MergeSpecsV3(docs...)
		if err != nil {
			errs = append(errs, fmt.Errorf("merge the openapi of %s: %w", path, err))
			continue
		}
		body, err := json.Marshal(merged)
		if err != nil {
			errs = append(errs, fmt.Errorf("encode the openapi of %s: %w", path, err))
			continue
		}
		extra[path] = body
	}
	d, err := o.base.WithExtra(extra, v2Defs)
	if err != nil {
		return err
	}
	o.cur.Store(d)
	return errors.Join(errs...)
}

func (o *openAPIDocs) serve(w http.ResponseWriter, req *http.Request) bool {
	docs := o.cur.Load()
	path := strings.TrimSuffix(req.URL.Path, "/")
	if path == "/openapi/v2" {
		docs.ServeV2(w, req)
		return true
	}
	if path != "/openapi/v3" {
		if _, _, ok := docs.GroupVersion(strings.TrimPrefix(path, "/openapi/v3/")); !ok {
			return false
		}
	}
	docs.ServeHTTP(w, req)
	return true
}
