package daemonset_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/daemonset"
	"github.com/kubette/kubette/internal/controller/kubelettest"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

const ns = "default"

type cluster struct {
	t       *testing.T
	ctx     context.Context
	c       kubernetes.Interface
	kubelet *kubelettest.Kubelet
	// kubeconfig is the admin kubeconfig, for kubectl.
	kubeconfig string
}

// start runs the DaemonSet controller and a stand-in scheduler and kubelet against a
// fresh control plane, with the given nodes.
func start(t *testing.T, nodes ...*corev1.Node) *cluster {
	t.Helper()
	env := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for _, n := range nodes {
		if _, err := env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deps, starter, err := controller.NewDeps(env.Config, "daemonset-test")
	if err != nil {
		t.Fatal(err)
	}
	dc, err := daemonset.NewWith(deps, daemonset.Options{Backoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	starter.Start(ctx)
	wg.Go(func() { dc.Run(ctx, 2) })
	k := kubelettest.New(env.Client, "")
	wg.Go(func() { k.Run(ctx) })
	return &cluster{t: t, ctx: ctx, c: env.Client, kubelet: k, kubeconfig: env.Kubeconfig}
}

func node(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}}},
	}
}

func newDaemonSet(name, image string) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
			},
		},
	}
}

func (c *cluster) create(ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	c.t.Helper()
	got, err := c.c.AppsV1().DaemonSets(ns).Create(c.ctx, ds, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return got
}

func (c *cluster) update(name string, change func(*appsv1.DaemonSet)) {
	c.t.Helper()
	poll.Until(c.t, "update "+name, func() error {
		ds, err := c.c.AppsV1().DaemonSets(ns).Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(ds)
		_, err = c.c.AppsV1().DaemonSets(ns).Update(c.ctx, ds, metav1.UpdateOptions{})
		return err
	})
}

// pods returns the DaemonSet's pods by their target node (spec.nodeName or affinity).
func (c *cluster) pods(name string) map[string][]corev1.Pod {
	c.t.Helper()
	list, err := c.c.CoreV1().Pods(ns).List(c.ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string][]corev1.Pod{}
	for _, p := range list.Items {
		n := p.Spec.NodeName
		if n == "" {
			n = p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0]
		}
		out[n] = append(out[n], p)
	}
	return out
}

// runsOn waits until the DaemonSet has exactly one ready pod, of image, on each of
// nodes and none elsewhere, and returns the pods.
func (c *cluster) runsOn(name, image string, nodes ...string) map[string]corev1.Pod {
	c.t.Helper()
	out := map[string]corev1.Pod{}
	poll.Until(c.t, fmt.Sprintf("%s runs %s on %v", name, image, nodes), func() error {
		byNode := c.pods(name)
		var have []string
		for n, pods := range byNode {
			have = append(have, n)
			if len(pods) != 1 || !kubelettest.Ready(&pods[0]) || pods[0].Spec.Containers[0].Image != image || pods[0].DeletionTimestamp != nil {
				return fmt.Errorf("node %s has %d pods", n, len(pods))
			}
			out[n] = pods[0]
		}
		sort.Strings(have)
		if strings.Join(have, ",") != strings.Join(nodes, ",") {
			return fmt.Errorf("pods on %v", have)
		}
		return nil
	})
	return out
}

func (c *cluster) status(name string, want func(s appsv1.DaemonSetStatus) bool) appsv1.DaemonSetStatus {
	c.t.Helper()
	var s appsv1.DaemonSetStatus
	poll.Until(c.t, "status of "+name, func() error {
		ds, err := c.c.AppsV1().DaemonSets(ns).Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s = ds.Status
		if ds.Status.ObservedGeneration != ds.Generation || !want(s) {
			return fmt.Errorf("generation %d, status %+v", ds.Generation, s)
		}
		return nil
	})
	return s
}

func (c *cluster) revisions(name string) []appsv1.ControllerRevision {
	c.t.Helper()
	list, err := c.c.AppsV1().ControllerRevisions(ns).List(c.ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		c.t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Revision < list.Items[j].Revision })
	return list.Items
}

// TestPlacement checks which nodes get a daemon pod: the node selector, taints and
// tolerations (a cordoned node keeps its daemon), and the pod as upstream makes it.
func TestPlacement(t *testing.T) {
	ssd := map[string]string{"disk": "ssd"}
	cordoned := node("n4", ssd)
	cordoned.Spec.Unschedulable = true
	cordoned.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}
	c := start(t,
		node("n1", ssd),
		node("n2", ssd, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}),
		node("n3", nil),
		cordoned,
	)
	ds := newDaemonSet("agent", "agent:1")
	ds.Spec.Template.Spec.NodeSelector = ssd
	ds = c.create(ds)
	pods := c.runsOn("agent", "agent:1", "n1", "n4")
	p := pods["n1"]
	if p.Spec.NodeName != "n1" {
		t.Errorf("pod bound to %q", p.Spec.NodeName)
	}
	terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchFields) != 1 || terms[0].MatchFields[0].Key != "metadata.name" || terms[0].MatchFields[0].Values[0] != "n1" {
		t.Errorf("node affinity %+v", terms)
	}
	if p.Labels[appsv1.ControllerRevisionHashLabelKey] == "" || p.Labels[daemonset.PodTemplateGenerationLabel] != "1" {
		t.Errorf("labels %v", p.Labels)
	}
	if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != ds.UID || ref.Kind != "DaemonSet" {
		t.Errorf("owner %+v", p.OwnerReferences)
	}
	var tols []string
	for _, tol := range p.Spec.Tolerations {
		tols = append(tols, fmt.Sprintf("%s:%s:%s", tol.Key, tol.Operator, tol.Effect))
	}
	want := "node.kubernetes.io/not-ready:Exists:NoExecute node.kubernetes.io/unreachable:Exists:NoExecute " +
		"node.kubernetes.io/disk-pressure:Exists:NoSchedule node.kubernetes.io/memory-pressure:Exists:NoSchedule " +
		"node.kubernetes.io/pid-pressure:Exists:NoSchedule node.kubernetes.io/unschedulable:Exists:NoSchedule"
	if strings.Join(tols, " ") != want {
		t.Errorf("tolerations %s", strings.Join(tols, " "))
	}
	s := c.status("agent", func(s appsv1.DaemonSetStatus) bool { return s.NumberAvailable == 2 })
	if s.DesiredNumberScheduled != 2 || s.CurrentNumberScheduled != 2 || s.NumberReady != 2 || s.UpdatedNumberScheduled != 2 || s.NumberMisscheduled != 0 || s.NumberUnavailable != 0 {
		t.Errorf("status %+v", s)
	}

	// Tolerating the dedicated taint adds n2.
	c.update("agent", func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	})
	c.runsOn("agent", "agent:1", "n1", "n2", "n4")

	// A node whose label goes loses its pod; an untolerated NoExecute taint evicts.
	poll.Until(t, "relabel n1 and taint n2", func() error {
		n1, err := c.c.CoreV1().Nodes().Get(c.ctx, "n1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		n1.Labels = nil
		if _, err := c.c.CoreV1().Nodes().Update(c.ctx, n1, metav1.UpdateOptions{}); err != nil {
			return err
		}
		n2, err := c.c.CoreV1().Nodes().Get(c.ctx, "n2", metav1.GetOptions{})
		if err != nil {
			return err
		}
		n2.Spec.Taints = append(n2.Spec.Taints, corev1.Taint{Key: "evict", Effect: corev1.TaintEffectNoExecute})
		_, err = c.c.CoreV1().Nodes().Update(c.ctx, n2, metav1.UpdateOptions{})
		return err
	})
	c.runsOn("agent", "agent:1", "n4")
	c.status("agent", func(s appsv1.DaemonSetStatus) bool {
		return s.DesiredNumberScheduled == 1 && s.CurrentNumberScheduled == 1 && s.NumberMisscheduled == 0
	})
}

// TestHostNetworkToleration checks the extra toleration of host-network daemons.
func TestHostNetworkToleration(t *testing.T) {
	c := start(t, node("n1", nil, corev1.Taint{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule}))
	ds := newDaemonSet("net", "net:1")
	ds.Spec.Template.Spec.HostNetwork = true
	c.create(ds)
	p := c.runsOn("net", "net:1", "n1")["n1"]
	found := false
	for _, tol := range p.Spec.Tolerations {
		found = found || tol.Key == corev1.TaintNodeNetworkUnavailable
	}
	if !found {
		t.Errorf("tolerations %+v", p.Spec.Tolerations)
	}
}

// TestRollingUpdate rolls a new image out with maxUnavailable 1: old pods go one at a
// time, each only after the previous replacement is available; then a template back
// to the first one reuses revision 1 as revision 3.
func TestRollingUpdate(t *testing.T) {
	c := start(t, node("n1", nil), node("n2", nil), node("n3", nil))
	c.create(newDaemonSet("agent", "agent:1"))
	c.runsOn("agent", "agent:1", "n1", "n2", "n3")
	c.kubelet.Hold("agent:2", true)
	c.update("agent", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "agent:2" })
	// One node gets a new pod that is held back from ready; the others keep their old pods.
	poll.Until(t, "one new pod", func() error {
		newPods, oldReady := 0, 0
		for _, pods := range c.pods("agent") {
			for _, p := range pods {
				if p.Spec.Containers[0].Image == "agent:2" {
					newPods++
				} else if kubelettest.Ready(&p) && p.DeletionTimestamp == nil {
					oldReady++
				}
			}
		}
		if newPods != 1 || oldReady != 2 {
			return fmt.Errorf("%d new pods, %d old ready pods", newPods, oldReady)
		}
		return nil
	})
	// While the new pod is not ready, no other old pod goes.
	s := c.status("agent", func(s appsv1.DaemonSetStatus) bool { return s.UpdatedNumberScheduled == 1 })
	if s.NumberAvailable != 2 || s.NumberUnavailable != 1 {
		t.Errorf("status %+v", s)
	}
	oldLeft := 0
	for _, pods := range c.pods("agent") {
		for _, p := range pods {
			if p.Spec.Containers[0].Image == "agent:1" && p.DeletionTimestamp == nil {
				oldLeft++
			}
		}
	}
	if oldLeft != 2 {
		t.Errorf("%d old pods left while the new one is not ready, want 2", oldLeft)
	}
	c.kubelet.Hold("agent:2", false)
	c.runsOn("agent", "agent:2", "n1", "n2", "n3")
	c.status("agent", func(s appsv1.DaemonSetStatus) bool { return s.UpdatedNumberScheduled == 3 && s.NumberAvailable == 3 })
	revs := c.revisions("agent")
	if len(revs) != 2 || revs[0].Revision != 1 || revs[1].Revision != 2 {
		t.Fatalf("revisions %d", len(revs))
	}
	first := revs[0].Name

	c.update("agent", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "agent:1" })
	pods := c.runsOn("agent", "agent:1", "n1", "n2", "n3")
	revs = c.revisions("agent")
	if len(revs) != 2 || revs[1].Name != first || revs[1].Revision != 3 {
		t.Errorf("after going back: revisions %v %v", revs[0].Name, revs[1].Name)
	}
	if h := pods["n1"].Labels[appsv1.ControllerRevisionHashLabelKey]; h != revs[1].Labels[appsv1.ControllerRevisionHashLabelKey] {
		t.Errorf("pod hash %s, revision %s", h, revs[1].Labels[appsv1.ControllerRevisionHashLabelKey])
	}
	if g := pods["n1"].Labels[daemonset.PodTemplateGenerationLabel]; g != "3" {
		t.Errorf("pod-template-generation %s", g)
	}
}

// TestSurge rolls out with maxSurge 1: the new pod starts beside the old one, which
// goes once the new one is available.
func TestSurge(t *testing.T) {
	c := start(t, node("n1", nil), node("n2", nil))
	ds := newDaemonSet("agent", "agent:1")
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{
		MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
	}}
	c.create(ds)
	c.runsOn("agent", "agent:1", "n1", "n2")
	c.kubelet.Hold("agent:2", true)
	c.update("agent", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "agent:2" })
	poll.Until(t, "an old and a new pod on one node", func() error {
		both := 0
		for _, pods := range c.pods("agent") {
			if len(pods) == 2 {
				both++
			} else if len(pods) != 1 || pods[0].Spec.Containers[0].Image != "agent:1" {
				return fmt.Errorf("%d pods", len(pods))
			}
		}
		if both != 1 {
			return fmt.Errorf("%d nodes with two pods", both)
		}
		return nil
	})
	c.kubelet.Hold("agent:2", false)
	c.runsOn("agent", "agent:2", "n1", "n2")
}

// TestOnDelete leaves old pods alone until they are deleted.
func TestOnDelete(t *testing.T) {
	c := start(t, node("n1", nil), node("n2", nil))
	ds := newDaemonSet("agent", "agent:1")
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
	c.create(ds)
	pods := c.runsOn("agent", "agent:1", "n1", "n2")
	c.update("agent", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "agent:2" })
	c.status("agent", func(s appsv1.DaemonSetStatus) bool { return s.UpdatedNumberScheduled == 0 && s.NumberAvailable == 2 })
	if err := c.c.CoreV1().Pods(ns).Delete(c.ctx, pods["n1"].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "n1 replaced with the new template", func() error {
		byNode := c.pods("agent")
		if len(byNode["n1"]) != 1 || byNode["n1"][0].Spec.Containers[0].Image != "agent:2" || !kubelettest.Ready(&byNode["n1"][0]) {
			return fmt.Errorf("n1: %d pods", len(byNode["n1"]))
		}
		if len(byNode["n2"]) != 1 || byNode["n2"][0].Name != pods["n2"].Name {
			return fmt.Errorf("n2 changed")
		}
		return nil
	})
	c.status("agent", func(s appsv1.DaemonSetStatus) bool { return s.UpdatedNumberScheduled == 1 })
}

// TestFailedPodReplaced deletes a failed daemon pod and makes a new one.
func TestFailedPodReplaced(t *testing.T) {
	c := start(t, node("n1", nil))
	ds := c.create(newDaemonSet("agent", "agent:1"))
	p := c.runsOn("agent", "agent:1", "n1")["n1"]
	p.Status.Phase = corev1.PodFailed
	if _, err := c.c.CoreV1().Pods(ns).UpdateStatus(c.ctx, &p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "a new pod", func() error {
		pods := c.pods("agent")["n1"]
		if len(pods) != 1 || pods[0].UID == p.UID || !kubelettest.Ready(&pods[0]) {
			return fmt.Errorf("%d pods", len(pods))
		}
		return nil
	})
	poll.Until(t, "FailedDaemonPod event", func() error {
		evs, err := c.c.CoreV1().Events(ns).List(c.ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(ds.UID) + ",reason=FailedDaemonPod"})
		if err != nil {
			return err
		}
		if len(evs.Items) == 0 {
			return fmt.Errorf("no event")
		}
		return nil
	})
}

// TestHistoryLimit keeps revisionHistoryLimit old revisions.
func TestHistoryLimit(t *testing.T) {
	c := start(t, node("n1", nil))
	ds := newDaemonSet("agent", "agent:1")
	ds.Spec.RevisionHistoryLimit = ptr.To[int32](1)
	c.create(ds)
	c.runsOn("agent", "agent:1", "n1")
	for _, img := range []string{"agent:2", "agent:3", "agent:4"} {
		c.update("agent", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = img })
		c.runsOn("agent", img, "n1")
	}
	poll.Until(t, "two revisions", func() error {
		revs := c.revisions("agent")
		if len(revs) != 2 || revs[0].Revision != 3 || revs[1].Revision != 4 {
			var got []string
			for _, r := range revs {
				got = append(got, fmt.Sprint(r.Revision))
			}
			return fmt.Errorf("revisions %v", got)
		}
		return nil
	})
}
