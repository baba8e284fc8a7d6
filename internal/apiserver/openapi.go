package apiserver

import (
	"net/http"
	"strings"

	"github.com/kubette/kubette/internal/openapi"
	"github.com/kubette/kubette/internal/registry"
)

// openAPIDocs serves /openapi/v3 from documents generated once at start-up, and
// /openapi/v2 built from them on first use.
type openAPIDocs struct{ docs *openapi.Documents }

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
	return &openAPIDocs{docs: d}, nil
}

func (o *openAPIDocs) serve(w http.ResponseWriter, req *http.Request) bool {
	path := strings.TrimSuffix(req.URL.Path, "/")
	if path == "/openapi/v2" {
		o.docs.ServeV2(w, req)
		return true
	}
	if path != "/openapi/v3" {
		if _, _, ok := o.docs.GroupVersion(strings.TrimPrefix(path, "/openapi/v3/")); !ok {
			return false
		}
	}
	o.docs.ServeHTTP(w, req)
	return true
}
