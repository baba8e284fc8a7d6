package interpodaffinity

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// snapshot is a tiny framework.SharedLister over fixed NodeInfos.
type snapshot struct {
	list   []*framework.NodeInfo
	byName map[string]*framework.NodeInfo
}

func newSnapshot(pods []*corev1.Pod, nodes []*corev1.Node) *snapshot {
	s := &snapshot{byName: map[string]*framework.NodeInfo{}}
	for _, n := range nodes {
		var on []*corev1.Pod
		for _, p := range pods {
			if p.Spec.NodeName == n.Name {
				on = append(on, p)
			}
		}
		ni := framework.NewNodeInfo(on...)
		ni.SetNode(n)
		s.list = append(s.list, ni)
		s.byName[n.Name] = ni
	}
	return s
}

func (s *snapshot) NodeInfos() framework.NodeInfoLister  { return s }
func (s *snapshot) List() ([]*framework.NodeInfo, error) { return s.list, nil }
func (s *snapshot) HavePodsWithAffinityList() ([]*framework.NodeInfo, error) {
	return slices.DeleteFunc(slices.Clone(s.list), func(n *framework.NodeInfo) bool { return len(n.PodsWithAffinity) == 0 }), nil
}
func (s *snapshot) HavePodsWithRequiredAntiAffinityList() ([]*framework.NodeInfo, error) {
	return slices.DeleteFunc(slices.Clone(s.list), func(n *framework.NodeInfo) bool { return len(n.PodsWithRequiredAntiAffinity) == 0 }), nil
}
func (s *snapshot) Get(name string) (*framework.NodeInfo, error) {
	if ni, ok := s.byName[name]; ok {
		return ni, nil
	}
	return nil, fmt.Errorf("node %q not found", name)
}

// handle is a framework.Handle with a snapshot and an informer factory over a fake clientset.
type handle struct {
	framework.Handle // nil: the methods the plugin never calls
	snap             *snapshot
	informers        informers.SharedInformerFactory
}

func (h handle) SnapshotSharedLister() framework.SharedLister {
	if h.snap == nil {
		return nil
	}
	return h.snap
}
func (h handle) ClientSet() kubernetes.Interface                        { return nil }
func (h handle) SharedInformerFactory() informers.SharedInformerFactory { return h.informers }

// newPlugin builds the plugin over snap with the given namespaces in the
// informer cache, started and synced.
func newPlugin(t testing.TB, args any, snap *snapshot, namespaces []runtime.Object) *InterPodAffinity {
	t.Helper()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(namespaces...), 0)
	p, err := New(t.Context(), args, handle{snap: snap, informers: factory})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(t.Context().Done())
	factory.WaitForCacheSync(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	return p.(*InterPodAffinity)
}

// checkStatus compares a status by code and reasons (nil means Success).
func checkStatus(t *testing.T, what string, got, want *framework.Status) {
	t.Helper()
	if got.Code() != want.Code() || !slices.Equal(got.Reasons(), want.Reasons()) {
		t.Errorf("%s: got %v %q, want %v %q", what, got.Code(), got.Reasons(), want.Code(), want.Reasons())
	}
}

// podWrapper builds pods like upstream's st.MakePod().
type podWrapper struct{ corev1.Pod }

func makePod() *podWrapper { return &podWrapper{} }

func (p *podWrapper) Obj() *corev1.Pod                { return &p.Pod }
func (p *podWrapper) Name(n string) *podWrapper       { p.Pod.Name = n; return p }
func (p *podWrapper) Namespace(ns string) *podWrapper { p.Pod.Namespace = ns; return p }
func (p *podWrapper) Node(n string) *podWrapper       { p.Spec.NodeName = n; return p }
func (p *podWrapper) Label(k, v string) *podWrapper {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[k] = v
	return p
}
func (p *podWrapper) LabelMap(l map[string]string) *podWrapper {
	for k, v := range l {
		p.Label(k, v)
	}
	return p
}

func (p *podWrapper) affinity() *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

func term(labelKey string, op metav1.LabelSelectorOperator, topologyKey string, vals ...string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: labelKey, Operator: op, Values: vals}}},
		TopologyKey:   topologyKey,
	}
}

func (p *podWrapper) addAffinity(t corev1.PodAffinityTerm) *podWrapper {
	a := p.affinity()
	if a.PodAffinity == nil {
		a.PodAffinity = &corev1.PodAffinity{}
	}
	a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, t)
	return p
}

func (p *podWrapper) addAntiAffinity(t corev1.PodAffinityTerm) *podWrapper {
	a := p.affinity()
	if a.PodAntiAffinity == nil {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, t)
	return p
}

// PodAffinityIn and the like add required terms, as upstream's builder with
// PodAffinityWithRequiredReq.
func (p *podWrapper) PodAffinityIn(labelKey, topologyKey string, vals ...string) *podWrapper {
	return p.addAffinity(term(labelKey, metav1.LabelSelectorOpIn, topologyKey, vals...))
}
func (p *podWrapper) PodAffinityNotIn(labelKey, topologyKey string, vals ...string) *podWrapper {
	return p.addAffinity(term(labelKey, metav1.LabelSelectorOpNotIn, topologyKey, vals...))
}
func (p *podWrapper) PodAffinityExists(labelKey, topologyKey string) *podWrapper {
	return p.addAffinity(term(labelKey, metav1.LabelSelectorOpExists, topologyKey))
}
func (p *podWrapper) PodAntiAffinityIn(labelKey, topologyKey string, vals ...string) *podWrapper {
	return p.addAntiAffinity(term(labelKey, metav1.LabelSelectorOpIn, topologyKey, vals...))
}
func (p *podWrapper) PodAntiAffinityNotIn(labelKey, topologyKey string, vals ...string) *podWrapper {
	return p.addAntiAffinity(term(labelKey, metav1.LabelSelectorOpNotIn, topologyKey, vals...))
}
func (p *podWrapper) PodAntiAffinityExists(labelKey, topologyKey string) *podWrapper {
	return p.addAntiAffinity(term(labelKey, metav1.LabelSelectorOpExists, topologyKey))
}

func node(name string, lbls map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
}

// testNamespaces are upstream's test namespaces: subteam{1,2}.team{1,2}
// labelled team=team1 or team=team2.
func testNamespaces() []runtime.Object {
	mk := func(name, team string) runtime.Object {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": team}}}
	}
	return []runtime.Object{
		mk("subteam1.team1", "team1"), mk("subteam2.team1", "team1"),
		mk("subteam1.team2", "team2"), mk("subteam2.team2", "team2"),
	}
}
