package daemonset

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubette/kubette/internal/controller/podstate"
)

// allowsSurge reports whether the DaemonSet's rolling update may start a new pod on a
// node before the old one goes.
func allowsSurge(ds *appsv1.DaemonSet) bool {
	surge, err := scaled(ds, 1, true)
	return err == nil && surge != 0
}

// scaled resolves maxSurge (surge true) or maxUnavailable against n nodes, rounding up.
func scaled(ds *appsv1.DaemonSet, n int, surge bool) (int, error) {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil {
		return 0, nil
	}
	v := ru.MaxUnavailable
	if surge {
		v = ru.MaxSurge
	}
	if v == nil {
		return 0, nil
	}
	return intstr.GetScaledValueFromIntOrPercent(v, n, true)
}

// updatedPodsOn returns the one updated and the one old pod of a node, skipping pods
// being deleted; ok is false when the node has more than one of either (the manage
// step removes the extra ones first).
func updatedPodsOn(ds *appsv1.DaemonSet, pods []*corev1.Pod, hash string) (newPod, oldPod *corev1.Pod, ok bool) {
	gen, hasGen := templateGeneration(ds)
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if isUpdated(p, hash, gen, hasGen) {
			if newPod != nil {
				return nil, nil, false
			}
			newPod = p
		} else {
			if oldPod != nil {
				return nil, nil, false
			}
			oldPod = p
		}
	}
	return newPod, oldPod, true
}

// rollingUpdate replaces old pods. Without surge it deletes old pods while fewer than
// maxUnavailable of the nodes that should run the daemon lack an available pod (an old
// pod that is not available anyway goes at once); the manage step then creates the new
// pods. With surge it starts new pods next to old ones on up to maxSurge nodes at a
// time and deletes each old pod once the new one is available.
func (c *Controller) rollingUpdate(ctx context.Context, ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string) error {
	tmpl := podTemplate(ds, hash)
	pods := make(map[string][]*corev1.Pod, len(byNode))
	for n, p := range byNode {
		pods[n] = p
	}
	desired := 0
	for _, node := range nodes {
		if run, _ := shouldRun(tmpl, node); run {
			desired++
			if _, ok := pods[node.Name]; !ok {
				pods[node.Name] = nil
			}
		}
	}
	maxSurge, err := scaled(ds, desired, true)
	if err != nil {
		return err
	}
	maxUnavailable, err := scaled(ds, desired, false)
	if err != nil {
		return err
	}
	if desired > 0 && maxSurge == 0 && maxUnavailable == 0 {
		maxUnavailable = 1
	}
	now := metav1.NewTime(c.clock.Now())
	available := func(p *corev1.Pod) bool { return podstate.IsPodAvailable(p, ds.Spec.MinReadySeconds, now) }
	nodeNames := sortedKeys(pods)

	if maxSurge == 0 {
		unavailable := 0
		var replace, candidates []*corev1.Pod
		for _, node := range nodeNames {
			newPod, oldPod, ok := updatedPodsOn(ds, pods[node], hash)
			switch {
			case !ok, oldPod == nil && newPod == nil, oldPod != nil && newPod != nil:
				unavailable++
			case newPod != nil:
				if !available(newPod) {
					unavailable++
				}
			case !available(oldPod):
				replace = append(replace, oldPod)
			case unavailable < maxUnavailable:
				candidates = append(candidates, oldPod)
			}
		}
		room := min(max(maxUnavailable-unavailable, 0), len(candidates))
		return c.syncNodes(ctx, ds, append(replace, candidates[:room]...), nil, hash)
	}

	var del []*corev1.Pod
	var allowed, candidates []string
	surging := 0
	for _, node := range nodeNames {
		newPod, oldPod, ok := updatedPodsOn(ds, pods[node], hash)
		switch {
		case !ok:
			surging++
		case oldPod == nil:
			// Nothing to replace: the manage step creates a missing pod.
		case newPod == nil:
			switch {
			case !available(oldPod):
				allowed = append(allowed, node)
			case surging < maxSurge:
				candidates = append(candidates, node)
			}
		case !available(newPod):
			surging++
		default:
			del = append(del, oldPod)
		}
	}
	room := min(max(maxSurge-surging, 0), len(candidates))
	return c.syncNodes(ctx, ds, del, append(allowed, candidates[:room]...), hash)
}
