package replicaset

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Kind is the kind of object a Controller syncs, seen as ReplicaSets. The controller's
// logic works on *appsv1.ReplicaSet; a kind with the same semantics (core/v1
// ReplicationController, package replication) converts its objects to and from that,
// as upstream's replication manager runs the ReplicaSet controller through adapters.
type Kind interface {
	// GroupVersionKind is the kind in the controller references of the pods.
	GroupVersionKind() schema.GroupVersionKind
	// Informer returns the shared informer of the kind's objects from factory.
	Informer(factory informers.SharedInformerFactory) cache.SharedIndexInformer
	// AsReplicaSet returns an object of the informer as a ReplicaSet that the caller
	// must not modify (it may share memory with the cache); ok is false for objects
	// of another type.
	AsReplicaSet(obj any) (rs *appsv1.ReplicaSet, ok bool)
	// EventObject is the object the events about rs are recorded on.
	EventObject(rs *appsv1.ReplicaSet) runtime.Object
	// Get reads the object from the API server.
	Get(ctx context.Context, client kubernetes.Interface, namespace, name string) (*appsv1.ReplicaSet, error)
	// UpdateStatus writes the status of rs through the status subresource.
	UpdateStatus(ctx context.Context, client kubernetes.Interface, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error)
}

// replicaSets is the Kind of apps/v1 ReplicaSets: no conversion.
type replicaSets struct{}

var _ Kind = replicaSets{}

// GroupVersionKind is apps/v1 ReplicaSet.
func (replicaSets) GroupVersionKind() schema.GroupVersionKind { return controllerKind }

// Informer is the shared ReplicaSet informer.
func (replicaSets) Informer(f informers.SharedInformerFactory) cache.SharedIndexInformer {
	return f.Apps().V1().ReplicaSets().Informer()
}

// AsReplicaSet returns the cached ReplicaSet itself.
func (replicaSets) AsReplicaSet(obj any) (*appsv1.ReplicaSet, bool) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	return rs, ok && rs != nil
}

// EventObject is the ReplicaSet.
func (replicaSets) EventObject(rs *appsv1.ReplicaSet) runtime.Object { return rs }

// Get reads the ReplicaSet from the API server.
func (replicaSets) Get(ctx context.Context, c kubernetes.Interface, namespace, name string) (*appsv1.ReplicaSet, error) {
	return c.AppsV1().ReplicaSets(namespace).Get(ctx, name, metav1.GetOptions{})
}

// UpdateStatus writes the ReplicaSet through replicasets/status.
func (replicaSets) UpdateStatus(ctx context.Context, c kubernetes.Interface, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	return c.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
}

// indexByControllerUID indexes an object by its controller's UID (to find the sibling
// ReplicaSets of one Deployment).
func indexByControllerUID(obj any) ([]string, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	ref := metav1.GetControllerOfNoCopy(o)
	if ref == nil {
		return nil, nil
	}
	return []string{string(ref.UID)}, nil
}

// cached returns the object namespace/name from the informer's cache as a ReplicaSet;
// ok is false when the cache has none.
func (c *Controller) cached(namespace, name string) (*appsv1.ReplicaSet, bool, error) {
	obj, exists, err := c.indexer.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil, false, err
	}
	rs, ok := c.kind.AsReplicaSet(obj)
	if !ok {
		return nil, false, fmt.Errorf("cache holds a %T for %s/%s", obj, namespace, name)
	}
	return rs, true, nil
}

// byIndex returns the cached objects of an index value as ReplicaSets.
func (c *Controller) byIndex(index, value string) ([]*appsv1.ReplicaSet, error) {
	objs, err := c.indexer.ByIndex(index, value)
	if err != nil {
		return nil, err
	}
	out := make([]*appsv1.ReplicaSet, 0, len(objs))
	for _, obj := range objs {
		if rs, ok := c.kind.AsReplicaSet(obj); ok {
			out = append(out, rs)
		}
	}
	return out, nil
}

// selecting returns the cached objects of pod's namespace whose selector matches its
// labels, as client-go's GetPodReplicaSets: an empty or invalid selector matches nothing.
func (c *Controller) selecting(pod *corev1.Pod) ([]*appsv1.ReplicaSet, error) {
	if len(pod.Labels) == 0 {
		return nil, fmt.Errorf("no %s found for pod %s/%s because it has no labels", c.kind.GroupVersionKind().Kind, pod.Namespace, pod.Name)
	}
	all, err := c.byIndex(cache.NamespaceIndex, pod.Namespace)
	if err != nil {
		return nil, err
	}
	var out []*appsv1.ReplicaSet
	for _, rs := range all {
		selector, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil || selector.Empty() || !selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, rs)
	}
	return out, nil
}
