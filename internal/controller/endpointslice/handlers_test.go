package endpointslice

import (
	"slices"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// queued drains the queue and returns its keys, sorted.
func (f *fixture) queued() []string {
	var keys []string
	for f.c.queue.Len() > 0 {
		k, _ := f.c.queue.Get()
		f.c.queue.Done(k)
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (f *fixture) wantQueued(what string, want ...string) {
	f.t.Helper()
	if got := f.queued(); !slices.Equal(got, want) {
		f.t.Errorf("%s queued %v, want %v", what, got, want)
	}
}

func TestEventHandlers(t *testing.T) {
	web, api := newService("web"), newService("api")
	pod := newPod("web", 1)
	f := newFixture(t, 0, web, api, newNode("node-a", "zone-1"), pod)

	f.c.addPod(pod)
	f.wantQueued("a new pod", "default/web")

	bumped := func(p *corev1.Pod) *corev1.Pod {
		p = p.DeepCopy()
		p.ResourceVersion = "2"
		return p
	}
	f.c.updatePod(pod, pod)
	f.wantQueued("a resync")
	annotated := bumped(pod)
	annotated.Annotations = map[string]string{"note": "x"}
	f.c.updatePod(pod, annotated)
	f.wantQueued("an annotation change")
	notReady := bumped(pod)
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	f.c.updatePod(pod, notReady)
	f.wantQueued("a readiness change", "default/web")
	moved := bumped(pod)
	moved.Labels = map[string]string{"app": "api"}
	f.c.updatePod(pod, moved)
	f.wantQueued("a relabelling", "default/api", "default/web")
	f.c.deletePod(cache.DeletedFinalStateUnknown{Key: "default/web-001", Obj: pod})
	f.wantQueued("a deletion", "default/web")

	node := newNode("node-a", "zone-1")
	sameZone := node.DeepCopy()
	sameZone.Labels["other"] = "x"
	f.c.updateNode(node, sameZone)
	f.wantQueued("a node change but its zone")
	otherZone := newNode("node-a", "zone-2")
	f.c.updateNode(node, otherZone)
	f.wantQueued("a zone change", "default/web")

	slice := existingSlice(t, "web-a", web, pod)
	f.c.tracker.Update(slice)
	f.c.addSlice(slice)
	f.c.updateSlice(slice, slice)
	f.wantQueued("its own write")
	foreign := slice.DeepCopy()
	foreign.ResourceVersion = "6"
	f.c.updateSlice(slice, foreign)
	f.wantQueued("a foreign change", "default/web")
	unmanaged := slice.DeepCopy()
	unmanaged.Labels[discoveryv1.LabelManagedBy] = "someone-else"
	f.c.updateSlice(slice, unmanaged)
	f.wantQueued("a slice taken over", "default/web")
	f.c.addSlice(unmanaged)
	f.wantQueued("an unmanaged slice")
	f.c.tracker.ExpectDeletion(slice)
	f.c.deleteSlice(slice)
	f.wantQueued("its own deletion")
	f.c.deleteSlice(cache.DeletedFinalStateUnknown{Key: "default/web-a", Obj: slice})
	f.wantQueued("a foreign deletion", "default/web")

	f.c.enqueueObject(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x"}})
	f.wantQueued("a Service", "default/x")
}
