// Package resourcemetrics serves metrics.k8s.io/v1beta1 NodeMetrics and PodMetrics, as
// upstream's metrics-server does, from the usage the scraper keeps: get and list
// (registry.Reader) of the Nodes and running Pods the API server has, with their labels
// (label selectors match the Node's or Pod's labels) and selectable by metadata.name
// and metadata.namespace. An object without usage yet is not listed and its get is
// metrics-server's NotFound.
package resourcemetrics

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/kubette/kubette/internal/metrics/scraper"
	"github.com/kubette/kubette/internal/registry"
)

// Objects reads the cluster's objects: the API server's Get and List.
type Objects interface {
	Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error)
	List(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error)
}

// Usages is the scraper's Store.
type Usages interface {
	Node(name string) (scraper.Usage, bool)
	Pod(namespace, name string) (scraper.PodUsage, bool)
}

var (
	nodesGR = schema.GroupResource{Resource: "nodes"}
	podsGR  = schema.GroupResource{Resource: "pods"}
	// The metrics resources, whose NotFound says an object has no metrics.
	nodeMetricsGR = registry.MetricsResource("nodes").GroupResource()
	podMetricsGR  = registry.MetricsResource("pods").GroupResource()
)

// Nodes serves NodeMetrics.
type Nodes struct {
	Objects Objects
	Usages  Usages
	// Now stamps each object's creationTimestamp, as metrics-server (default time.Now).
	Now func() time.Time
}

// Pods serves PodMetrics.
type Pods struct {
	Objects Objects
	Usages  Usages
	// Now stamps each object's creationTimestamp, as metrics-server (default time.Now).
	Now func() time.Time
}

var (
	_ registry.Reader = (*Nodes)(nil)
	_ registry.Reader = (*Pods)(nil)
)

// Get returns the NodeMetrics of a node: the Node's NotFound when there is no such
// node, metrics-server's NotFound of nodes.metrics.k8s.io when it has no usage yet.
func (n *Nodes) Get(ctx context.Context, _, name string) (runtime.Object, error) {
	obj, err := n.Objects.Get(ctx, nodesGR, "", name)
	if err != nil {
		return nil, err
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("node %q is a %T", name, obj))
	}
	m, ok := n.metrics(node)
	if !ok {
		return nil, apierrors.NewNotFound(nodeMetricsGR, name)
	}
	return m, nil
}

// List returns the NodeMetrics of the nodes matching the selectors that have usage,
// by name.
func (n *Nodes) List(ctx context.Context, _ string, ls labels.Selector, fs fields.Selector) ([]runtime.Object, error) {
	objs, err := n.Objects.List(ctx, nodesGR, "")
	if err != nil {
		return nil, err
	}
	out := make([]runtime.Object, 0, len(objs))
	for _, obj := range objs {
		node, ok := obj.(*corev1.Node)
		if !ok || !matches(&node.ObjectMeta, false, ls, fs) {
			continue
		}
		if m, ok := n.metrics(node); ok {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].(*metricsv1beta1.NodeMetrics).Name < out[j].(*metricsv1beta1.NodeMetrics).Name
	})
	return out, nil
}

func (n *Nodes) metrics(node *corev1.Node) (*metricsv1beta1.NodeMetrics, bool) {
	u, ok := n.Usages.Node(node.Name)
	if !ok {
		return nil, false
	}
	return &metricsv1beta1.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, Labels: node.Labels, CreationTimestamp: metav1.NewTime(clock(n.Now))},
		Timestamp:  metav1.NewTime(u.Timestamp), Window: metav1.Duration{Duration: u.Window},
		Usage: resourceList(u),
	}, true
}

// Get returns the PodMetrics of a running pod: the Pod's NotFound when there is no
// such pod or it is not running (metrics-server knows running pods only),
// metrics-server's NotFound of pods.metrics.k8s.io ("namespace/name") when it has no
// usage yet.
func (p *Pods) Get(ctx context.Context, namespace, name string) (runtime.Object, error) {
	obj, err := p.Objects.Get(ctx, podsGR, namespace, name)
	if err != nil {
		return nil, err
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("pod %s/%s is a %T", namespace, name, obj))
	}
	if pod.Status.Phase != corev1.PodRunning {
		return nil, apierrors.NewNotFound(podsGR, name)
	}
	m, ok := p.metrics(pod)
	if !ok {
		return nil, apierrors.NewNotFound(podMetricsGR, namespace+"/"+name)
	}
	return m, nil
}

// List returns the PodMetrics of the running pods of namespace ("" for all) matching
// the selectors that have usage, by namespace and name.
func (p *Pods) List(ctx context.Context, namespace string, ls labels.Selector, fs fields.Selector) ([]runtime.Object, error) {
	objs, err := p.Objects.List(ctx, podsGR, namespace)
	if err != nil {
		return nil, err
	}
	out := make([]runtime.Object, 0, len(objs))
	for _, obj := range objs {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Status.Phase != corev1.PodRunning || !matches(&pod.ObjectMeta, true, ls, fs) {
			continue
		}
		if m, ok := p.metrics(pod); ok {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].(*metricsv1beta1.PodMetrics), out[j].(*metricsv1beta1.PodMetrics)
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out, nil
}

func (p *Pods) metrics(pod *corev1.Pod) (*metricsv1beta1.PodMetrics, bool) {
	u, ok := p.Usages.Pod(pod.Namespace, pod.Name)
	if !ok {
		return nil, false
	}
	m := &metricsv1beta1.PodMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, Labels: pod.Labels,
			CreationTimestamp: metav1.NewTime(clock(p.Now))},
		Timestamp: metav1.NewTime(u.Timestamp), Window: metav1.Duration{Duration: u.Window},
		Containers: make([]metricsv1beta1.ContainerMetrics, 0, len(u.Containers)),
	}
	for _, c := range u.Containers {
		m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name, Usage: resourceList(c.Usage)})
	}
	return m, true
}

// matches applies the selectors: labels to the object's labels, fields to
// metadata.name (and metadata.namespace of a namespaced object), as metrics-server.
func matches(m *metav1.ObjectMeta, namespaced bool, ls labels.Selector, fs fields.Selector) bool {
	if ls != nil && !ls.Empty() && !ls.Matches(labels.Set(m.Labels)) {
		return false
	}
	if fs == nil || fs.Empty() {
		return true
	}
	set := fields.Set{"metadata.name": m.Name}
	if namespaced {
		set["metadata.namespace"] = m.Namespace
	}
	return fs.Matches(set)
}

// resourceList is a usage as metrics-server writes it: CPU in nanocores, the working
// set in bytes (binary SI).
func resourceList(u scraper.Usage) corev1.ResourceList {
	mem := *resource.NewScaledQuantity(clampInt64(u.Memory), 0)
	mem.Format = resource.BinarySI
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewScaledQuantity(clampInt64(u.CPU), resource.Nano),
		corev1.ResourceMemory: mem,
	}
}

func clampInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

func clock(f func() time.Time) time.Time {
	if f == nil {
		return time.Now()
	}
	return f()
}
