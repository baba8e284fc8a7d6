package apiserver

import (
	"context"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// What an action's Do sees of the request beyond its body, and how its answers of
// other body versions and Status results are handled.

type actionOptionsKey struct{}

// ActionOptionsFrom returns the create options of the action request in ctx: dryRun
// and fieldManager of its query, as upstream hands its creaters metav1.CreateOptions.
func ActionOptionsFrom(ctx context.Context) metav1.CreateOptions {
	o, _ := ctx.Value(actionOptionsKey{}).(metav1.CreateOptions)
	return o
}

// withActionOptions is the request's context with its create options.
func withActionOptions(req *http.Request) context.Context {
	q := req.URL.Query()
	o := metav1.CreateOptions{DryRun: q["dryRun"], FieldManager: q.Get("fieldManager")}
	return context.WithValue(req.Context(), actionOptionsKey{}, o)
}

// decodeActionBody decodes data as gvk into obj or, when the body names one of the
// kinds of also, into a new object of that kind.
func (s *Server) decodeActionBody(data []byte, mediaType string, gvk schema.GroupVersionKind, obj runtime.Object, also map[schema.GroupVersionKind]func() runtime.Object) (runtime.Object, error) {
	_, err := s.decodeInto(data, mediaType, gvk, obj, "Ignore")
	if err == nil {
		return obj, nil
	}
	for other, newObj := range also {
		o := newObj()
		if _, e := s.decodeInto(data, mediaType, other, o, "Ignore"); e == nil {
			return o, nil
		}
	}
	return nil, err
}

// writeActionStatus writes a Status an action returned with 201, its code 201 unless
// it says otherwise, as upstream's create handler.
func writeActionStatus(s *Server, w http.ResponseWriter, req *http.Request, st *metav1.Status) {
	st.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
	if st.Code == 0 {
		st.Code = http.StatusCreated
	}
	s.writeObject(w, req, http.StatusCreated, st)
}
