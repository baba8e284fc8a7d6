package podtopologyspread

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

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

// handle is a framework.Handle with only a snapshot.
type handle struct {
	framework.Handle // nil: the methods the plugin never calls
	snap             *snapshot
}

func (h handle) SnapshotSharedLister() framework.SharedLister {
	if h.snap == nil {
		return nil
	}
	return h.snap
}
func (h handle) ClientSet() kubernetes.Interface                        { return nil }
func (h handle) SharedInformerFactory() informers.SharedInformerFactory { return nil }

func newPlugin(t testing.TB, snap *snapshot) *PodTopologySpread {
	t.Helper()
	p, err := New(t.Context(), nil, handle{snap: snap})
	if err != nil {
		t.Fatal(err)
	}
	return p.(*PodTopologySpread)
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
func (p *podWrapper) Terminating() *podWrapper        { p.DeletionTimestamp = &metav1.Time{}; return p }
func (p *podWrapper) NodeSelector(m map[string]string) *podWrapper {
	p.Spec.NodeSelector = m
	return p
}
func (p *podWrapper) Label(k, v string) *podWrapper {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[k] = v
	return p
}
func (p *podWrapper) Toleration(key string) *podWrapper {
	p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	return p
}
func (p *podWrapper) nodeAffinity(op corev1.NodeSelectorOperator, key string, vals []string) *podWrapper {
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: vals}}}},
	}}}
	return p
}
func (p *podWrapper) NodeAffinityIn(key string, vals ...string) *podWrapper {
	return p.nodeAffinity(corev1.NodeSelectorOpIn, key, vals)
}
func (p *podWrapper) NodeAffinityNotIn(key string, vals ...string) *podWrapper {
	return p.nodeAffinity(corev1.NodeSelectorOpNotIn, key, vals)
}

// SpreadConstraint appends a topology spread constraint.
func (p *podWrapper) SpreadConstraint(maxSkew int32, key string, action corev1.UnsatisfiableConstraintAction, sel *metav1.LabelSelector,
	minDomains *int32, affinityPolicy, taintsPolicy *corev1.NodeInclusionPolicy, matchLabelKeys []string) *podWrapper {
	p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
		MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: action, LabelSelector: sel, MinDomains: minDomains,
		NodeAffinityPolicy: affinityPolicy, NodeTaintsPolicy: taintsPolicy, MatchLabelKeys: matchLabelKeys,
	})
	return p
}

// nodeWrapper builds nodes like upstream's st.MakeNode().
type nodeWrapper struct{ corev1.Node }

func makeNode() *nodeWrapper                      { return &nodeWrapper{} }
func (n *nodeWrapper) Obj() *corev1.Node          { return &n.Node }
func (n *nodeWrapper) Name(s string) *nodeWrapper { n.Node.Name = s; return n }
func (n *nodeWrapper) Taints(t []corev1.Taint) *nodeWrapper {
	n.Spec.Taints = t
	return n
}
func (n *nodeWrapper) Label(k, v string) *nodeWrapper {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[k] = v
	return n
}

func exists(key string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpExists}}}
}

var (
	fooSelector  = exists("foo")
	barSelector  = exists("bar")
	ignorePolicy = corev1.NodeInclusionPolicyIgnore
	honorPolicy  = corev1.NodeInclusionPolicyHonor
	taints       = []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}
)

func ptrTo[T any](v T) *T { return &v }
