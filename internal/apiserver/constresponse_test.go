package apiserver

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kubette/kubette/internal/registry"
)

// TestConstResponseAsWriteObject checks that the binding's response encoded once at
// start-up is, for every Accept a client sends, what writeObject writes for the object.
func TestConstResponseAsWriteObject(t *testing.T) {
	scheme, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{codecs: newCodecs(scheme)}
	c, err := s.codecs.newConstResponse(bindingCreatedStatus())
	if err != nil {
		t.Fatal(err)
	}
	for _, accept := range []string{"", "*/*", "application/json", "application/yaml",
		"application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf, */*",
		"application/json;as=Table;v=v1;g=meta.k8s.io, application/json"} {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/pods/p/binding", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		want, got := httptest.NewRecorder(), httptest.NewRecorder()
		s.writeObject(want, req, http.StatusCreated, bindingCreatedStatus())
		s.writeConst(got, req, http.StatusCreated, c)
		if got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") ||
			!bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) || got.Body.Len() == 0 {
			t.Errorf("Accept %q: got %d %s %q, want %d %s %q", accept, got.Code, got.Header().Get("Content-Type"), got.Body.Bytes(),
				want.Code, want.Header().Get("Content-Type"), want.Body.Bytes())
		}
	}
}
