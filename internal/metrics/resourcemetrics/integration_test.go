package resourcemetrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	apiregistrationclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/kubette/kubette/internal/metrics/scraper"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// fakeKubelets is the scraper's source: for each node, its pods' containers with the
// CPU each burns (in millicores); every read is 15 s after the one before (the
// samples' own timestamps), so the rates are exact whatever the real scrape times.
type fakeKubelets struct {
	mu    sync.Mutex
	calls map[string]int
	pods  map[string]map[string]map[string]float64 // node -> namespace/pod -> container -> millicores
	down  map[string]bool
}

var t0 = time.Unix(1700000000, 0)

func (f *fakeKubelets) ResourceMetrics(_ context.Context, n *corev1.Node) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[n.Name]++
	if f.down[n.Name] {
		return nil, fmt.Errorf("dial tcp: connection refused")
	}
	call := float64(f.calls[n.Name])
	ts := t0.Add(time.Duration(call) * 15 * time.Second).UnixMilli()
	var b strings.Builder
	// The node burns 400m.
	fmt.Fprintf(&b, "node_cpu_usage_seconds_total %v %d\nnode_memory_working_set_bytes %d %d\n", 6*call, ts, 2<<30, ts)
	for ref, containers := range f.pods[n.Name] {
		ns, pod, _ := strings.Cut(ref, "/")
		for c, milli := range containers {
			labels := fmt.Sprintf(`{container=%q,namespace=%q,pod=%q}`, c, ns, pod)
			fmt.Fprintf(&b, "container_cpu_usage_seconds_total%s %v %d\n", labels, milli/1000*15*call, ts)
			fmt.Fprintf(&b, "container_memory_working_set_bytes%s %d %d\n", labels, 10<<20, ts)
			fmt.Fprintf(&b, "container_start_time_seconds%s %d %d\n", labels, t0.Add(-time.Hour).Unix(), ts)
		}
	}
	return []byte(b.String()), nil
}

func (f *fakeKubelets) callsOf(node string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[node]
}

// TestMetricsAPI runs the resource metrics API over a real API server with a fake
// kubelet source, through the k8s.io/metrics clientset as kubectl top and the HPA
// controller use it: node and pod metrics after two scrapes, selectors, NotFound
// shapes, protobuf, Tables, 405 for writes and watches, discovery, OpenAPI and the
// local APIService.
func TestMetricsAPI(t *testing.T) {
	kubelets := &fakeKubelets{calls: map[string]int{}, down: map[string]bool{"broken": true},
		pods: map[string]map[string]map[string]float64{
			"node-a": {"default/web-1": {"app": 200, "side": 10}, "default/web-2": {"app": 50}, "team/db": {"db": 300}},
		}}
	env := testenv.Start(t, testenv.Options{MetricsSource: kubelets, MetricResolution: 100 * time.Millisecond})
	ctx := context.Background()
	for name, lbls := range map[string]map[string]string{
		"node-a": {"zone": "a"}, "broken": {"zone": "b"}, "sim-1": {scraper.LabelSimulated: "true"},
	} {
		if _, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ ns, name, phase, app string }{
		{"default", "web-1", "Running", "web"}, {"default", "web-2", "Running", "web"}, {"team", "db", "Running", "db"},
		{"default", "pending", "Pending", "web"},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name, Labels: map[string]string{"app": p.app}},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
		created, err := env.Client.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Phase = corev1.PodPhase(p.phase)
		if _, err := env.Client.CoreV1().Pods(p.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mc, err := metricsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	m := mc.MetricsV1beta1()

	var nodes *metricsv1beta1.NodeMetricsList
	poll.Until(t, "node metrics", poll.Explain(func() (bool, string) {
		nodes, err = m.NodeMetricses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(nodes.Items) == 1, fmt.Sprintf("%d items", len(nodes.Items))
	}))
	n := nodes.Items[0]
	if cpu, mem := n.Usage[corev1.ResourceCPU], n.Usage[corev1.ResourceMemory]; n.Name != "node-a" || cpu.String() != "400m" || mem.String() != "2Gi" ||
		n.Window.Duration != 15*time.Second || n.Labels["zone"] != "a" {
		t.Errorf("node metrics = %+v", n)
	}
	if kubelets.callsOf("sim-1") != 0 {
		t.Errorf("the simulated node's kubelet was asked %d times", kubelets.callsOf("sim-1"))
	}
	if _, err := m.NodeMetricses().Get(ctx, "broken", metav1.GetOptions{}); !apierrors.IsNotFound(err) || err.Error() != `nodes.metrics.k8s.io "broken" not found` {
		t.Errorf("get the failing node: %v", err)
	}
	if _, err := m.NodeMetricses().Get(ctx, "nothere", metav1.GetOptions{}); !apierrors.IsNotFound(err) || err.Error() != `nodes "nothere" not found` {
		t.Errorf("get a missing node: %v", err)
	}
	if l, err := m.NodeMetricses().List(ctx, metav1.ListOptions{LabelSelector: "zone=b"}); err != nil || len(l.Items) != 0 {
		t.Errorf("zone=b: %v %v", l, err)
	}

	names := func(l *metricsv1beta1.PodMetricsList) []string {
		var out []string
		for _, p := range l.Items {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		return out
	}
	var all *metricsv1beta1.PodMetricsList
	poll.Until(t, "pod metrics", poll.Explain(func() (bool, string) {
		all, err = m.PodMetricses("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(all.Items) == 3, fmt.Sprint(names(all))
	}))
	if got, want := names(all), []string{"default/web-1", "default/web-2", "team/db"}; !reflect.DeepEqual(got, want) {
		t.Errorf("all pods = %v, want %v", got, want)
	}
	web1 := all.Items[0]
	var ctrs []string
	for _, c := range web1.Containers {
		cpu := c.Usage[corev1.ResourceCPU]
		ctrs = append(ctrs, c.Name+"="+cpu.String())
	}
	sort.Strings(ctrs)
	if !reflect.DeepEqual(ctrs, []string{"app=200m", "side=10m"}) || web1.Labels["app"] != "web" || web1.Window.Duration != 15*time.Second {
		t.Errorf("web-1 = %v %+v", ctrs, web1)
	}
	for opts, want := range map[metav1.ListOptions][]string{
		{LabelSelector: "app=db"}:                 {"team/db"},
		{FieldSelector: "metadata.name=web-2"}:    {"default/web-2"},
		{FieldSelector: "metadata.namespace=team"}: {"team/db"},
	} {
		l, err := m.PodMetricses("").List(ctx, opts)
		if err != nil || !reflect.DeepEqual(names(l), want) {
			t.Errorf("list %+v = %v %v, want %v", opts, names(l), err, want)
		}
	}
	if l, err := m.PodMetricses("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"}); err != nil || !reflect.DeepEqual(names(l), []string{"default/web-1", "default/web-2"}) {
		t.Errorf("default app=web = %v %v", names(l), err)
	}
	if _, err := m.PodMetricses("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-a"}); !apierrors.IsBadRequest(err) {
		t.Errorf("an unsupported field selector: %v, want 400", err)
	}
	if p, err := m.PodMetricses("team").Get(ctx, "db", metav1.GetOptions{}); err != nil || p.Containers[0].Name != "db" {
		t.Errorf("get team/db: %+v %v", p, err)
	}
	for name, want := range map[string]string{"pending": `pods "pending" not found`, "nothere": `pods "nothere" not found`} {
		if _, err := m.PodMetricses("default").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) || err.Error() != want {
			t.Errorf("get %s: %v, want %q", name, err, want)
		}
	}

	// Protobuf, as the controller manager's clients ask.
	pcfg := rest.CopyConfig(env.Config)
	pcfg.ContentType = "application/vnd.kubernetes.protobuf"
	pcfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	pmc, err := metricsclient.NewForConfig(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := pmc.MetricsV1beta1().PodMetricses("default").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 2 {
		t.Errorf("protobuf list: %v %v", l, err)
	}

	rc := env.Client.CoreV1().RESTClient()
	// A Table, as kubectl get asks.
	raw, err := rc.Get().AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if !reflect.DeepEqual(cols, []string{"Name", "cpu", "memory", "Window"}) || len(table.Rows) != 2 ||
		!reflect.DeepEqual(table.Rows[0].Cells, []interface{}{"web-1", "210m", "20Mi", "15s"}) {
		t.Errorf("table = %v %+v", cols, table.Rows)
	}
	// Read-only: writes and watches are 405.
	for _, req := range []*rest.Request{
		rc.Post().AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods").Body([]byte(`{"metadata":{"name":"x"}}`)),
		rc.Delete().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes/node-a"),
		rc.Put().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes/node-a").Body([]byte(`{"metadata":{"name":"node-a"}}`)),
		rc.Get().AbsPath("/apis/metrics.k8s.io/v1beta1/pods").Param("watch", "true"),
	} {
		if err := req.Do(ctx).Error(); !apierrors.IsMethodNotSupported(err) {
			t.Errorf("%s: %v, want 405", req.URL(), err)
		}
	}

	// Discovery, legacy and aggregated, and OpenAPI.
	rl, err := env.Client.Discovery().ServerResourcesForGroupVersion("metrics.k8s.io/v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	var res []string
	for _, r := range rl.APIResources {
		res = append(res, fmt.Sprintf("%s %s %v %v", r.Name, r.Kind, r.Namespaced, r.Verbs))
	}
	if want := []string{"nodes NodeMetrics false [get list]", "pods PodMetrics true [get list]"}; !reflect.DeepEqual(res, want) {
		t.Errorf("discovery = %q, want %q", res, want)
	}
	raw, err = rc.Get().AbsPath("/apis").SetHeader("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var agg apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(raw, &agg); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range agg.Items {
		if g.Name == "metrics.k8s.io" && len(g.Versions) == 1 && g.Versions[0].Version == "v1beta1" && len(g.Versions[0].Resources) == 2 {
			found = true
		}
	}
	if !found {
		t.Errorf("aggregated discovery lacks metrics.k8s.io/v1beta1")
	}
	if err := rc.Get().AbsPath("/openapi/v3/apis/metrics.k8s.io/v1beta1").Do(ctx).Error(); err != nil {
		t.Errorf("OpenAPI v3 of metrics.k8s.io/v1beta1: %v", err)
	}

	reg, err := apiregistrationclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the local metrics APIService", poll.Explain(func() (bool, string) {
		s, err := reg.ApiregistrationV1().APIServices().Get(ctx, "v1beta1.metrics.k8s.io", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ok := s.Spec.Service == nil && s.Spec.GroupPriorityMinimum == 100 && s.Spec.VersionPriority == 100 &&
			s.Labels["kube-aggregator.kubernetes.io/automanaged"] == "onstart"
		return ok, fmt.Sprintf("%+v %v", s.Spec, s.Labels)
	}))
}
