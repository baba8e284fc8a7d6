package resourcemetrics

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/kubette/kubette/internal/metrics/scraper"
)

// objects is the cluster: nodes and pods by namespace/name, listed in key order.
type objects struct {
	nodes []*corev1.Node
	pods  []*corev1.Pod
}

func (o *objects) Get(_ context.Context, gr schema.GroupResource, ns, name string) (runtime.Object, error) {
	switch gr.Resource {
	case "nodes":
		for _, n := range o.nodes {
			if n.Name == name {
				return n.DeepCopy(), nil
			}
		}
	case "pods":
		for _, p := range o.pods {
			if p.Namespace == ns && p.Name == name {
				return p.DeepCopy(), nil
			}
		}
	}
	return nil, apierrors.NewNotFound(gr, name)
}

func (o *objects) List(_ context.Context, gr schema.GroupResource, ns string) ([]runtime.Object, error) {
	var out []runtime.Object
	switch gr.Resource {
	case "nodes":
		for _, n := range o.nodes {
			out = append(out, n.DeepCopy())
		}
	case "pods":
		for _, p := range o.pods {
			if ns == "" || p.Namespace == ns {
				out = append(out, p.DeepCopy())
			}
		}
	}
	return out, nil
}

// usages has usage for the nodes and pods it names.
type usages struct {
	nodes map[string]scraper.Usage
	pods  map[string]scraper.PodUsage // by namespace/name
}

func (u usages) Node(name string) (scraper.Usage, bool) { x, ok := u.nodes[name]; return x, ok }
func (u usages) Pod(ns, name string) (scraper.PodUsage, bool) {
	x, ok := u.pods[ns+"/"+name]
	return x, ok
}

var (
	ts  = time.Unix(1700000000, 0).UTC()
	now = func() time.Time { return ts.Add(time.Second) }
)

func use(cpu, mem uint64) scraper.Usage {
	return scraper.Usage{Timestamp: ts, Window: 15 * time.Second, CPU: cpu, Memory: mem}
}

func pod(ns, name, phase string, lbls map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Status: corev1.PodStatus{Phase: corev1.PodPhase(phase)}}
}

func cluster() (*objects, usages) {
	o := &objects{
		nodes: []*corev1.Node{
			{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"zone": "x"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"zone": "y"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}, // no usage yet
		},
		pods: []*corev1.Pod{
			pod("default", "web-1", "Running", map[string]string{"app": "web"}),
			pod("default", "web-2", "Running", map[string]string{"app": "web"}),
			pod("default", "done", "Succeeded", map[string]string{"app": "web"}),
			pod("default", "new", "Running", nil),
			pod("other", "db", "Running", map[string]string{"app": "db"}),
		},
	}
	u := usages{
		nodes: map[string]scraper.Usage{"a": use(250_000_000, 1<<30), "b": use(1_500_000_000, 3<<30)},
		pods: map[string]scraper.PodUsage{
			"default/web-1": {Timestamp: ts, Window: 15 * time.Second, Containers: []scraper.ContainerUsage{
				{Name: "app", Usage: use(12_345_678, 10<<20)}, {Name: "side", Usage: use(1_000_000, 4096)}}},
			"default/web-2": {Timestamp: ts, Window: 14 * time.Second, Containers: []scraper.ContainerUsage{{Name: "app", Usage: use(1, 1)}}},
			"default/done":  {Timestamp: ts, Window: 15 * time.Second, Containers: []scraper.ContainerUsage{{Name: "app", Usage: use(1, 1)}}},
			"other/db":      {Timestamp: ts, Window: 15 * time.Second, Containers: []scraper.ContainerUsage{{Name: "db", Usage: use(1, 1)}}},
		},
	}
	return o, u
}

func TestNodeMetrics(t *testing.T) {
	o, u := cluster()
	n := &Nodes{Objects: o, Usages: u, Now: now}
	ctx := context.Background()
	obj, err := n.Get(ctx, "", "a")
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*metricsv1beta1.NodeMetrics)
	if got.Name != "a" || got.Labels["zone"] != "x" || !got.Timestamp.Time.Equal(ts) || got.Window.Duration != 15*time.Second ||
		!got.CreationTimestamp.Time.Equal(now()) {
		t.Errorf("node a = %+v", got)
	}
	cpu, mem := got.Usage[corev1.ResourceCPU], got.Usage[corev1.ResourceMemory]
	if cpu.String() != "250m" || mem.String() != "1Gi" || cpu.MilliValue() != 250 {
		t.Errorf("usage = %s %s, want 250m 1Gi", cpu.String(), mem.String())
	}

	for name, want := range map[string]string{
		"fresh":   `nodes.metrics.k8s.io "fresh" not found`,
		"missing": `nodes "missing" not found`,
	} {
		_, err := n.Get(ctx, "", name)
		if !apierrors.IsNotFound(err) || err.Error() != want {
			t.Errorf("get %s: %v, want NotFound %q", name, err, want)
		}
	}

	for sel, want := range map[string][]string{
		"":                       {"a", "b"},
		"zone=y":                 {"b"},
		"zone in (x,y),zone!=x":  {"b"},
		"metadata.name=a":        {"a"},
		"metadata.name!=a":       {"b"},
		"zone=x|metadata.name=b": nil,
	} {
		ls, fs := labels.Everything(), fields.Everything()
		var err error
		switch {
		case sel == "":
		case sel == "zone=x|metadata.name=b":
			ls, fs = labels.SelectorFromSet(labels.Set{"zone": "x"}), fields.OneTermEqualSelector("metadata.name", "b")
		case len(sel) > 9 && sel[:9] == "metadata.":
			if fs, err = fields.ParseSelector(sel); err != nil {
				t.Fatal(err)
			}
		default:
			if ls, err = labels.Parse(sel); err != nil {
				t.Fatal(err)
			}
		}
		items, err := n.List(ctx, "", ls, fs)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, it := range items {
			names = append(names, it.(*metricsv1beta1.NodeMetrics).Name)
		}
		if !reflect.DeepEqual(names, want) {
			t.Errorf("list %q = %v, want %v", sel, names, want)
		}
	}
}

func TestPodMetrics(t *testing.T) {
	o, u := cluster()
	p := &Pods{Objects: o, Usages: u, Now: now}
	ctx := context.Background()
	obj, err := p.Get(ctx, "default", "web-1")
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*metricsv1beta1.PodMetrics)
	if got.Namespace != "default" || got.Name != "web-1" || got.Labels["app"] != "web" || len(got.Containers) != 2 ||
		got.Containers[0].Name != "app" || got.Containers[1].Name != "side" {
		t.Fatalf("web-1 = %+v", got)
	}
	cpu, mem := got.Containers[0].Usage[corev1.ResourceCPU], got.Containers[0].Usage[corev1.ResourceMemory]
	if cpu.String() != "12345678n" || mem.String() != "10Mi" {
		t.Errorf("app usage = %s %s, want 12345678n 10Mi", cpu.String(), mem.String())
	}

	for key, want := range map[[2]string]string{
		{"default", "new"}:     `pods.metrics.k8s.io "default/new" not found`, // running, no usage yet
		{"default", "done"}:    `pods "done" not found`,                       // not running: metrics-server knows it not
		{"default", "missing"}: `pods "missing" not found`,
		{"other", "web-1"}:     `pods "web-1" not found`,
	} {
		_, err := p.Get(ctx, key[0], key[1])
		if !apierrors.IsNotFound(err) || err.Error() != want {
			t.Errorf("get %v: %v, want NotFound %q", key, err, want)
		}
	}

	list := func(ns string, ls labels.Selector, fs fields.Selector) []string {
		t.Helper()
		items, err := p.List(ctx, ns, ls, fs)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range items {
			m := it.(*metricsv1beta1.PodMetrics)
			out = append(out, m.Namespace+"/"+m.Name)
		}
		return out
	}
	if got := list("", labels.Everything(), fields.Everything()); !reflect.DeepEqual(got, []string{"default/web-1", "default/web-2", "other/db"}) {
		t.Errorf("all namespaces = %v", got)
	}
	if got := list("default", labels.Everything(), fields.Everything()); !reflect.DeepEqual(got, []string{"default/web-1", "default/web-2"}) {
		t.Errorf("default = %v", got)
	}
	if got := list("", labels.SelectorFromSet(labels.Set{"app": "db"}), fields.Everything()); !reflect.DeepEqual(got, []string{"other/db"}) {
		t.Errorf("app=db = %v", got)
	}
	if got := list("", labels.Everything(), fields.OneTermEqualSelector("metadata.namespace", "other")); !reflect.DeepEqual(got, []string{"other/db"}) {
		t.Errorf("metadata.namespace=other = %v", got)
	}
	if got := list("default", labels.Everything(), fields.OneTermNotEqualSelector("metadata.name", "web-1")); !reflect.DeepEqual(got, []string{"default/web-2"}) {
		t.Errorf("metadata.name!=web-1 = %v", got)
	}
	if got := list("nothing", labels.Everything(), fields.Everything()); len(got) != 0 {
		t.Errorf("empty namespace = %v", got)
	}
}
