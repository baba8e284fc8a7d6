package apiserver

import (
	"context"
	"encoding/json"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubette/kubette/internal/printers"
	"github.com/kubette/kubette/internal/registry"
)

// tableFor renders served objects as the Table kubectl get asks for. includeObject is
// None, Object or Metadata (the default), as upstream.
func (s *Server) tableFor(r *registry.Resource, objs []runtime.Object, includeObject, _ string) (*metav1.Table, error) {
	var t *metav1.Table
	var err error
	if r.Custom != nil {
		t, err = r.CustomTable(context.Background(), objs)
	} else {
		p, ok := printers.For(r.GroupResource())
		if !ok {
			p = printers.Default()
		}
		t, err = printers.Table(p, objs, s.cfg.Now())
	}
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	for i := range t.Rows {
		if i >= len(objs) {
			break
		}
		var embed runtime.Object
		switch includeObject {
		case "None":
			continue
		case "Object":
			embed = objs[i]
		default:
			embed = partialMetadata(objs[i])
		}
		raw, err := json.Marshal(embed)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		t.Rows[i].Object = runtime.RawExtension{Raw: raw}
	}
	t.APIVersion, t.Kind = "meta.k8s.io/v1", "Table"
	return t, nil
}
