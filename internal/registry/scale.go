package registry

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// deploymentScale maps the scale subresource onto a Deployment's spec.replicas,
// status.replicas and pod selector.
func deploymentScale() *ScaleStrategy {
	return &ScaleStrategy{
		Replicas: func(obj runtime.Object) (int32, int32, string, error) {
			d, ok := obj.(*appsv1.Deployment)
			if !ok {
				return 0, 0, "", fmt.Errorf("scale of %T as a Deployment", obj)
			}
			return replicasOf(d.Spec.Replicas, d.Status.Replicas, d.Spec.Selector)
		},
		SetReplicas: func(obj runtime.Object, n int32) {
			if d, ok := obj.(*appsv1.Deployment); ok {
				d.Spec.Replicas = &n
			}
		},
	}
}

// replicaSetScale maps the scale subresource onto a ReplicaSet's spec.replicas,
// status.replicas and pod selector.
func replicaSetScale() *ScaleStrategy {
	return &ScaleStrategy{
		Replicas: func(obj runtime.Object) (int32, int32, string, error) {
			rs, ok := obj.(*appsv1.ReplicaSet)
			if !ok {
				return 0, 0, "", fmt.Errorf("scale of %T as a ReplicaSet", obj)
			}
			return replicasOf(rs.Spec.Replicas, rs.Status.Replicas, rs.Spec.Selector)
		},
		SetReplicas: func(obj runtime.Object, n int32) {
			if rs, ok := obj.(*appsv1.ReplicaSet); ok {
				rs.Spec.Replicas = &n
			}
		},
	}
}

// replicationControllerScale maps the scale subresource onto a ReplicationController's
// spec.replicas, status.replicas and equality selector.
func replicationControllerScale() *ScaleStrategy {
	return &ScaleStrategy{
		Replicas: func(obj runtime.Object) (int32, int32, string, error) {
			rc, ok := obj.(*corev1.ReplicationController)
			if !ok {
				return 0, 0, "", fmt.Errorf("scale of %T as a ReplicationController", obj)
			}
			var want int32
			if rc.Spec.Replicas != nil {
				want = *rc.Spec.Replicas
			}
			return want, rc.Status.Replicas, labels.SelectorFromSet(rc.Spec.Selector).String(), nil
		},
		SetReplicas: func(obj runtime.Object, n int32) {
			if rc, ok := obj.(*corev1.ReplicationController); ok {
				rc.Spec.Replicas = &n
			}
		},
	}
}

// replicasOf is the scale of a kind with optional spec.replicas and a LabelSelector.
func replicasOf(spec *int32, status int32, sel *metav1.LabelSelector) (int32, int32, string, error) {
	var want int32
	if spec != nil {
		want = *spec
	}
	selector := ""
	if sel != nil {
		ls, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return 0, 0, "", fmt.Errorf("selector: %w", err)
		}
		selector = ls.String()
	}
	return want, status, selector, nil
}

// statefulSetScale maps the scale subresource onto a StatefulSet's spec.replicas,
// status.replicas and pod selector.
func statefulSetScale() *ScaleStrategy {
	return &ScaleStrategy{
		Replicas: func(obj runtime.Object) (int32, int32, string, error) {
			s, ok := obj.(*appsv1.StatefulSet)
			if !ok {
				return 0, 0, "", fmt.Errorf("scale of %T as a StatefulSet", obj)
			}
			return replicasOf(s.Spec.Replicas, s.Status.Replicas, s.Spec.Selector)
		},
		SetReplicas: func(obj runtime.Object, n int32) {
			if s, ok := obj.(*appsv1.StatefulSet); ok {
				s.Spec.Replicas = &n
			}
		},
	}
}
