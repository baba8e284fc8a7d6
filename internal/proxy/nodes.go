package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/proxy/iptables"
)

// nodeCIDRs follows the pod CIDRs of the cluster's Nodes (spec.podCIDRs, or
// the legacy spec.podCIDR), which the guard rejects where no local route
// serves them (Options.RejectUnroutedPodCIDR). The informer keeps only each
// Node's name and pod CIDRs (thousands of simulated Nodes, each with a
// status that changes, need not be held), and wakes the sync loop only when
// a Node's pod CIDRs change, appear or go.
type nodeCIDRs struct {
	factory informers.SharedInformerFactory
	synced  cache.InformerSynced
	lister  listersv1.NodeLister
	dirty   atomic.Bool // set by the informer's handler, cleared by merged
	// Owned by the sync loop.
	last []netip.Prefix
}

// newNodeCIDRs sets up the Node informer; wake is called after every change
// of the set.
func newNodeCIDRs(client kubernetes.Interface, wake func()) (*nodeCIDRs, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(stripNode))
	inf := factory.Core().V1().Nodes()
	n := &nodeCIDRs{factory: factory, synced: inf.Informer().HasSynced, lister: inf.Lister()}
	n.dirty.Store(true)
	changed := func() {
		n.dirty.Store(true)
		wake()
	}
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if node, ok := obj.(*corev1.Node); ok && len(podCIDRsOf(node)) == 0 {
				return
			}
			changed()
		},
		UpdateFunc: func(oldObj, newObj any) {
			before, ok1 := oldObj.(*corev1.Node)
			after, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 && slices.Equal(podCIDRsOf(before), podCIDRsOf(after)) {
				return
			}
			changed()
		},
		DeleteFunc: func(any) { changed() },
	})
	if err != nil {
		return nil, fmt.Errorf("watch nodes: %w", err)
	}
	return n, nil
}

// start runs the informer until ctx is done and waits for its first list;
// false means ctx ended first.
func (n *nodeCIDRs) start(ctx context.Context) bool {
	n.factory.Start(ctx.Done())
	return cache.WaitForCacheSync(ctx.Done(), n.synced)
}

// merged returns the Nodes' IPv4 pod CIDRs merged into the fewest covering
// prefixes (iptables.MergePrefixes), listing the Nodes again only after a
// change.
func (n *nodeCIDRs) merged() []netip.Prefix {
	if !n.dirty.Swap(false) {
		return n.last
	}
	nodes, err := n.lister.List(labels.Everything())
	if err != nil { // a cache lister does not fail; keep the last set
		n.dirty.Store(true)
		return n.last
	}
	var all []netip.Prefix
	for _, node := range nodes {
		for _, s := range podCIDRsOf(node) {
			if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
				all = append(all, p)
			}
		}
	}
	n.last = iptables.MergePrefixes(all)
	return n.last
}

// podCIDRsOf returns spec.podCIDRs, or spec.podCIDR when only that is set.
func podCIDRsOf(node *corev1.Node) []string {
	if len(node.Spec.PodCIDRs) > 0 {
		return node.Spec.PodCIDRs
	}
	if node.Spec.PodCIDR != "" {
		return []string{node.Spec.PodCIDR}
	}
	return nil
}

// stripNode is the informer's transform: a Node with only what the guard and
// the informer's bookkeeping need.
func stripNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil // a tombstone, say
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, UID: node.UID, ResourceVersion: node.ResourceVersion},
		Spec:       corev1.NodeSpec{PodCIDR: node.Spec.PodCIDR, PodCIDRs: node.Spec.PodCIDRs},
	}, nil
}
