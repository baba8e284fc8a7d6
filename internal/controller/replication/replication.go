// Package replication is the replication manager: the controller of core/v1
// ReplicationControllers. As upstream's pkg/controller/replication, it is the
// ReplicaSet controller (package replicaset) run on ReplicationControllers through an
// adapter that shows each one as a ReplicaSet (its equality selector as matchLabels)
// and writes the status back as a ReplicationController's; the pods it creates are
// controlled by the ReplicationController and its events are recorded on it.
package replication

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/replicaset"
)

// Name is the controller's name in the controller manager's registry (upstream's
// --controllers name).
const Name = "replicationcontroller"

// eventComponent is the source of its events, as upstream's.
const eventComponent = "replication-controller"

// queueName names its work queue, as upstream's.
const queueName = "replicationmanager"

// controllerKind is the kind of the objects it syncs.
var controllerKind = corev1.SchemeGroupVersion.WithKind("ReplicationController")

// New builds the replication manager on the shared informers of d.
func New(d controller.Deps) (controller.Runner, error) {
	c, err := replicaset.NewFor(d, replicaset.Config{Kind: Kind{}, Name: queueName, EventComponent: eventComponent})
	if err != nil {
		return nil, fmt.Errorf("replication manager: %w", err)
	}
	return c, nil
}

// Kind shows ReplicationControllers to the ReplicaSet controller as ReplicaSets.
type Kind struct{}

var _ replicaset.Kind = Kind{}

// GroupVersionKind is v1 ReplicationController.
func (Kind) GroupVersionKind() schema.GroupVersionKind { return controllerKind }

// Informer is the shared ReplicationController informer.
func (Kind) Informer(f informers.SharedInformerFactory) cache.SharedIndexInformer {
	return f.Core().V1().ReplicationControllers().Informer()
}

// AsReplicaSet converts a ReplicationController of the informer.
func (Kind) AsReplicaSet(obj any) (*appsv1.ReplicaSet, bool) {
	rc, ok := obj.(*corev1.ReplicationController)
	if !ok || rc == nil {
		return nil, false
	}
	return ToReplicaSet(rc), true
}

// EventObject is the ReplicationController rs stands for.
func (Kind) EventObject(rs *appsv1.ReplicaSet) runtime.Object { return FromReplicaSet(rs) }

// Get reads the ReplicationController from the API server, as a ReplicaSet.
func (Kind) Get(ctx context.Context, c kubernetes.Interface, namespace, name string) (*appsv1.ReplicaSet, error) {
	rc, err := c.CoreV1().ReplicationControllers(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return ToReplicaSet(rc), nil
}

// UpdateStatus writes the status of the ReplicationController rs stands for.
func (Kind) UpdateStatus(ctx context.Context, c kubernetes.Interface, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	rc, err := c.CoreV1().ReplicationControllers(rs.Namespace).UpdateStatus(ctx, FromReplicaSet(rs), metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return ToReplicaSet(rc), nil
}

// ToReplicaSet shows rc as a ReplicaSet: the same metadata, replicas, minReadySeconds,
// template and status, and its selector as matchLabels. The result shares maps and
// slices with rc: deep-copy it before changing it.
func ToReplicaSet(rc *corev1.ReplicationController) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "ReplicaSet"},
		ObjectMeta: rc.ObjectMeta,
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        rc.Spec.Replicas,
			MinReadySeconds: rc.Spec.MinReadySeconds,
		},
		Status: appsv1.ReplicaSetStatus{
			Replicas:             rc.Status.Replicas,
			FullyLabeledReplicas: rc.Status.FullyLabeledReplicas,
			ReadyReplicas:        rc.Status.ReadyReplicas,
			AvailableReplicas:    rc.Status.AvailableReplicas,
			ObservedGeneration:   rc.Status.ObservedGeneration,
		},
	}
	if rc.Spec.Selector != nil {
		rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}
	}
	if rc.Spec.Template != nil {
		rs.Spec.Template = *rc.Spec.Template
	}
	for _, c := range rc.Status.Conditions {
		rs.Status.Conditions = append(rs.Status.Conditions, appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return rs
}

// FromReplicaSet is the ReplicationController a ReplicaSet of ToReplicaSet stands for.
// A selector with expressions cannot come from a ReplicationController; only its
// matchLabels are kept. The result shares maps and slices with rs.
func FromReplicaSet(rs *appsv1.ReplicaSet) *corev1.ReplicationController {
	template := rs.Spec.Template
	rc := &corev1.ReplicationController{
		TypeMeta:   metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: controllerKind.Kind},
		ObjectMeta: rs.ObjectMeta,
		Spec: corev1.ReplicationControllerSpec{
			Replicas:        rs.Spec.Replicas,
			MinReadySeconds: rs.Spec.MinReadySeconds,
			Template:        &template,
		},
		Status: corev1.ReplicationControllerStatus{
			Replicas:             rs.Status.Replicas,
			FullyLabeledReplicas: rs.Status.FullyLabeledReplicas,
			ReadyReplicas:        rs.Status.ReadyReplicas,
			AvailableReplicas:    rs.Status.AvailableReplicas,
			ObservedGeneration:   rs.Status.ObservedGeneration,
		},
	}
	if rs.Spec.Selector != nil {
		rc.Spec.Selector = rs.Spec.Selector.MatchLabels
	}
	for _, c := range rs.Status.Conditions {
		rc.Status.Conditions = append(rc.Status.Conditions, corev1.ReplicationControllerCondition{
			Type: corev1.ReplicationControllerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return rc
}
