package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
	"github.com/kubette/kubette/internal/storage/etcd"
	"github.com/kubette/kubette/internal/trace"
)

// userAuth authenticates every request as the user named by the X-Test-User header.
type userAuth struct{}

func (userAuth) Authenticate(req *http.Request) (*filters.User, bool, error) {
	if u := req.Header.Get("X-Test-User"); u != "" {
		return &filters.User{Name: u}, true, nil
	}
	return nil, false, nil
}

// headerRT sets a header on every request.
type headerRT struct {
	rt          http.RoundTripper
	name, value string
}

func (h headerRT) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set(h.name, h.value)
	return h.rt.RoundTrip(req)
}

func traceServer(t testing.TB, capacity int) (*httptest.Server, func(user, ua string) kubernetes.Interface) {
	t.Helper()
	return authzServer(t, capacity, nil)
}

// authzServer is traceServer with an authorizer (nil: every authenticated user may do anything).
func authzServer(t testing.TB, capacity int, authz authorizer.Authorizer) (*httptest.Server, func(user, ua string) kubernetes.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e, err := etcd.StartEmbedded(ctx, etcd.EmbeddedConfig{DataDir: t.TempDir(), UnsafeNoFsync: true})
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	st, err := e.InProcessStore()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(ctx, Config{Store: st, TraceCapacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.EnsureNamespaces(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler(userAuth{}, authz))
	t.Cleanup(hs.Close)
	return hs, func(user, ua string) kubernetes.Interface {
		cfg := &rest.Config{Host: hs.URL, UserAgent: ua, QPS: -1,
			WrapTransport: func(rt http.RoundTripper) http.RoundTripper { return headerRT{rt, "X-Test-User", user} }}
		return kubernetes.NewForConfigOrDie(cfg)
	}
}

func TestTraceRecordsRequestsWritesAndDeliveries(t *testing.T) {
	hs, client := traceServer(t, 0)
	ctx := context.Background()
	scheduler := client("system:kube-scheduler", "kubette-scheduler")
	w, err := scheduler.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rs := client("system:kube-controller-manager", "kubette/v0 (linux/amd64) kubernetes/x/kube-controller-manager")
	created, err := rs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added {
			t.Fatalf("watch: %v", ev.Type)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event")
	}
	if err := scheduler.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: created.Name},
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var recs []trace.Record
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		raw, err := rs.CoreV1().RESTClient().Get().AbsPath(trace.Endpoint).Param("uid", string(created.UID)).DoRaw(ctx)
		if err != nil {
			return false, err
		}
		var resp trace.Response
		if err := json.Unmarshal(raw, &resp); err != nil {
			return false, err
		}
		recs = resp.Records
		return len(recs) >= 4, nil // create, its delivery, the binding, its delivery
	})
	if err != nil {
		t.Fatalf("records: %v: %+v", err, recs)
	}
	var create, bind trace.Record
	for _, r := range recs {
		switch {
		case r.Type == trace.TypeRequest && r.Verb == "create" && r.Subresource == "":
			create = r
		case r.Subresource == "binding":
			bind = r
		}
	}
	if create.Type != trace.TypeRequest || create.Verb != "create" || create.Method != "POST" || create.Path != "/api/v1/namespaces/default/pods" ||
		create.Name != created.Name || create.UID != string(created.UID) || create.Code != 201 || create.Resource != "pods" ||
		create.Key != "/registry/pods/default/"+created.Name || create.WriteOp != "create" || create.Revision == 0 ||
		trace.Actor(create.User, create.UserAgent, create.FieldManager, create.Resource, "", false) != "replicaset-controller" {
		t.Errorf("create record: %+v", create)
	}
	if bind.Code != 201 || bind.WriteOp != "update" || bind.Revision <= create.Revision ||
		trace.Actor(bind.User, bind.UserAgent, "", bind.Resource, bind.Subresource, false) != "scheduler" {
		t.Errorf("binding record: %+v", bind)
	}
	var delivered []trace.Record
	for _, r := range recs {
		if r.Type == trace.TypeDelivery {
			delivered = append(delivered, r)
		}
	}
	if len(delivered) < 2 || delivered[0].EventType != "ADDED" || delivered[0].Revision != create.Revision || delivered[0].User != "system:kube-scheduler" ||
		delivered[1].EventType != "MODIFIED" || delivered[1].Revision != bind.Revision {
		t.Errorf("deliveries: %+v", delivered)
	}

	// The endpoint is behind authentication.
	resp, err := http.Get(hs.URL + trace.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous GET %s: %d, want 401", trace.Endpoint, resp.StatusCode)
	}
}

func TestTraceOff(t *testing.T) {
	_, client := traceServer(t, -1)
	c := client("admin", "test")
	if _, err := c.CoreV1().ConfigMaps("default").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := c.CoreV1().RESTClient().Get().AbsPath(trace.Endpoint).Do(context.Background()).Error()
	if err == nil {
		t.Fatal("trace endpoint answered with tracing off")
	}
}
