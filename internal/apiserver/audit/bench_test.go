package audit

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkRequest measures the request path through authentication, audit,
// impersonation and authorization to a handler that answers a configmap, without the
// audit filter and with policies at each level, the events going to a Log that writes to
// io.Discard (its writer goroutine runs beside the requests).
func BenchmarkRequest(b *testing.B) {
	const cm = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default","uid":"0b6c1c7c-5d1e-4d53-9d55-1c9f3c2b1d11","resourceVersion":"12345","creationTimestamp":"2026-01-02T03:04:05Z"},"data":{"k":"some value of moderate length, as configmaps have"}}`
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Body != nil {
			_, _ = io.Copy(io.Discard, req.Body)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, cm)
	})
	for _, c := range []struct{ name, policy string }{
		{"NoAudit", ""},
		{"None", "rules: [{level: None}]"},
		{"Metadata", "rules: [{level: Metadata}]"},
		{"RequestResponse", "rules: [{level: RequestResponse}]"},
	} {
		for _, method := range []string{"GET", "PUT"} {
			b.Run(c.name+"/"+method, func(b *testing.B) {
				var a *Auditor
				if c.policy != "" {
					ctx, cancel := context.WithCancel(context.Background())
					l, err := NewLog(ctx, LogConfig{Path: "-", Stdout: io.Discard}, nil)
					if err != nil {
						b.Fatal(err)
					}
					defer func() { cancel(); <-l.Done() }()
					p, _, err := ParsePolicy([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\n" + c.policy))
					if err != nil {
						b.Fatal(err)
					}
					a = New(p, l)
				}
				h := chain(a, handler)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					var body io.Reader
					if method == "PUT" {
						body = strings.NewReader(cm)
					}
					req := httptest.NewRequest(method, "/api/v1/namespaces/default/configmaps/c", body)
					req.Header.Set("Authorization", "Bearer admin")
					req.Header.Set("Content-Type", "application/json")
					h.ServeHTTP(httptest.NewRecorder(), req)
				}
			})
		}
	}
}
