package trace

import (
	"strings"
	"testing"
	"time"
)

func TestBuildOrdersByTimeAndFiltersUnlessAll(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	cm := "kubette/v0 (linux/amd64) kubernetes/x/kube-controller-manager"
	in := Input{
		Objects: []Object{{Ref: ObjectRef{Resource: "deployments.apps", Namespace: "default", Name: "web"}, Kind: "Deployment", UID: "d"}},
		Records: []Record{
			// Recorded first (a delivery is recorded when sent, a request when it ends)
			// but later in time than the request that caused it.
			{Seq: 1, Time: at(5), Type: TypeDelivery, User: "system:kube-controller-manager", UserAgent: cm, Resource: "deployments.apps", Kind: "Deployment", Namespace: "default", Name: "web", EventType: "ADDED", Revision: 9},
			{Seq: 2, Time: at(1), Type: TypeRequest, User: "kubernetes-admin", UserAgent: "kubectl/v1.32.0", Verb: "create", Method: "POST", Path: "/apis/apps/v1/namespaces/default/deployments", Resource: "deployments.apps", Namespace: "default", Name: "web", Code: 201, Key: "/registry/deployments/default/web", Revision: 9, WriteOp: "create"},
			{Seq: 3, Time: at(0), Type: TypeRequest, User: "kubernetes-admin", UserAgent: "kubectl/v1.32.0", Verb: "get", Method: "GET", Path: "/apis/apps/v1/namespaces/default/deployments/web", Resource: "deployments.apps", Namespace: "default", Name: "web", Code: 404},
			{Seq: 4, Time: at(7), Type: TypeRequest, User: "system:kube-controller-manager", UserAgent: cm, Verb: "update", Method: "PUT", Path: "/apis/apps/v1/namespaces/default/deployments/web/status", Resource: "deployments.apps", Subresource: "status", Namespace: "default", Name: "web", Code: 200, Key: "/registry/deployments/default/web", Revision: 10, WriteOp: "update"},
			// Nobody acts on this one: the scheduler does nothing with Deployments.
			{Seq: 5, Time: at(6), Type: TypeDelivery, User: "system:kube-scheduler", UserAgent: "kubette-scheduler", Resource: "deployments.apps", Kind: "Deployment", Namespace: "default", Name: "web", EventType: "ADDED", Revision: 9},
		},
	}
	text := Text(Build(in, Options{}))
	want := []string{
		"kubectl → API server: POST /apis/apps/v1/namespaces/default/deployments → 201",
		"API server → etcd: create /registry/deployments/default/web (rev 9)",
		"API server -) deployment-controller: watch ADDED deployment default/web (rev 9)",
		"deployment-controller → API server: PUT /apis/apps/v1/namespaces/default/deployments/web/status → 200",
	}
	last := -1
	for _, w := range want {
		i := strings.Index(text, w)
		if i < 0 || i < last {
			t.Fatalf("want %q after the previous steps in:\n%s", w, text)
		}
		last = i
	}
	if strings.Contains(text, "GET") || strings.Contains(text, "scheduler") {
		t.Errorf("reads and idle deliveries kept without --all:\n%s", text)
	}
	all := Text(Build(in, Options{All: true}))
	if !strings.Contains(all, "GET /apis/apps/v1/namespaces/default/deployments/web → 404") || !strings.Contains(all, "API server -) scheduler") {
		t.Errorf("--all dropped records:\n%s", all)
	}
}
