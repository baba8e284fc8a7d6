package apiserver

import (
	"testing"

	"github.com/kubette/kubette/internal/registry"
)

// FuzzDecodeBody drives arbitrary request bodies through the decoding path of a
// create (decode in each media type, defaulting, validation): it must answer with an
// error or an object, never panic. The seed corpus lives in testdata/fuzz.
func FuzzDecodeBody(f *testing.F) {
	seeds := []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx","resources":{"limits":{"cpu":"1"}}}]}}}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"x","ports":[{"containerPort":80}]}],"volumes":[{"name":"v","configMap":{"name":"c"}}]}}`,
		`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80,"targetPort":"http"}],"type":"NodePort"}}`,
		`{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"i"},"spec":{"rules":[{"host":"a.example","http":{"paths":[{"path":"/","pathType":"Prefix","backend":{"service":{"name":"a","port":{"number":80}}}}]}}]}}`,
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  a: b\n",
		"k8s\x00\n\x0c\n\x02v1\x12\x06Secret",
		`{"kind":"ConfigMap","metadata":{"name":1}}`,
		`{"apiVersion":"v1","kind":"Pod","spec":{"containers":null,"initContainers":[{}]}}`,
		`[`,
	}
	for _, s := range seeds {
		for _, mt := range []string{mimeJSON, mimeYAML, mimeProtobuf} {
			f.Add([]byte(s), mt)
		}
	}
	scheme, err := registry.NewScheme()
	if err != nil {
		f.Fatal(err)
	}
	s := &Server{scheme: scheme, codecs: newCodecs(scheme)}
	resources := registry.Builtin()
	f.Fuzz(func(t *testing.T, data []byte, mediaType string) {
		for _, r := range resources {
			obj := r.New()
			if _, err := s.decodeInto(data, mediaType, r.GroupVersionKind(), obj, "Strict"); err != nil {
				continue
			}
			r.PrepareForCreate(obj)
			r.Default(obj)
			_ = r.Validate(obj)
			_ = r.ValidateUpdate("", obj, r.New())
			_ = r.ValidateUpdate("status", obj, r.New())
		}
	})
}

// FuzzContinueToken checks that any continue token is either rejected or stays within the prefix.
func FuzzContinueToken(f *testing.F) {
	f.Add(encodeContinue(42, "/registry/pods/default/web\x00", "/registry/pods/"))
	f.Add("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiIuLi9zZWNyZXRzIn0")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		rev, start, err := decodeContinue(token, "/registry/pods/")
		if err != nil {
			return
		}
		if rev <= 0 || len(start) < len("/registry/pods/") || start[:len("/registry/pods/")] != "/registry/pods/" {
			t.Fatalf("token %q accepted with rev %d start %q", token, rev, start)
		}
	})
}

// FuzzAccept checks the Accept header parser on arbitrary input.
func FuzzAccept(f *testing.F) {
	f.Add("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")
	f.Add("application/vnd.kubernetes.protobuf,application/json")
	f.Fuzz(func(t *testing.T, header string) {
		for _, m := range parseAccept(header) {
			if m.typ != "json" && m.typ != "yaml" && m.typ != "protobuf" {
				t.Fatalf("unexpected media type %q", m.typ)
			}
		}
	})
}
