package printers

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// deploymentPrinter prints deployments: NAME READY UP-TO-DATE AVAILABLE AGE
// | CONTAINERS IMAGES SELECTOR.
func deploymentPrinter() Printer {
	// Descriptions come from extensions/v1beta1, as in kube-apiserver.
	statusDoc := extensionsv1beta1.DeploymentStatus{}.SwaggerDoc()
	specDoc := extensionsv1beta1.DeploymentSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Ready", "string", 0, "Number of the pod with ready state"),
			column("Up-to-date", "string", 0, statusDoc["updatedReplicas"]),
			column("Available", "string", 0, statusDoc["availableReplicas"]),
			ageColumn(),
			column("Containers", "string", 1, "Names of each container in the template."),
			column("Images", "string", 1, "Images referenced by each container in the template."),
			column("Selector", "string", 1, specDoc["selector"]),
		},
		Row: rowFor(func(d *appsv1.Deployment, now time.Time) []interface{} {
			selector := "<invalid>"
			if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
				selector = sel.String()
			}
			names, images := containerCells(d.Spec.Template.Spec.Containers)
			return []interface{}{
				d.Name,
				fmt.Sprintf("%d/%d", int64(d.Status.ReadyReplicas), int64(desiredReplicas(d.Spec.Replicas))),
				int64(d.Status.UpdatedReplicas),
				int64(d.Status.AvailableReplicas),
				translateTimestampSince(d.CreationTimestamp, now),
				names,
				images,
				selector,
			}
		}),
	}
}

// replicaSetPrinter prints replica sets: NAME DESIRED CURRENT READY AGE |
// CONTAINERS IMAGES SELECTOR.
func replicaSetPrinter() Printer {
	// Descriptions come from extensions/v1beta1, as in kube-apiserver.
	specDoc := extensionsv1beta1.ReplicaSetSpec{}.SwaggerDoc()
	statusDoc := extensionsv1beta1.ReplicaSetStatus{}.SwaggerDoc()
	return Printer{
		Columns: replicaColumns(specDoc, statusDoc),
		Row: rowFor(func(rs *appsv1.ReplicaSet, now time.Time) []interface{} {
			names, images := containerCells(rs.Spec.Template.Spec.Containers)
			return []interface{}{
				rs.Name,
				int64(desiredReplicas(rs.Spec.Replicas)),
				int64(rs.Status.Replicas),
				int64(rs.Status.ReadyReplicas),
				translateTimestampSince(rs.CreationTimestamp, now),
				names,
				images,
				metav1.FormatLabelSelector(rs.Spec.Selector),
			}
		}),
	}
}

// replicaColumns are the columns of ReplicaSets and ReplicationControllers: NAME DESIRED
// CURRENT READY AGE | CONTAINERS IMAGES SELECTOR, described by the kind's own field docs.
func replicaColumns(specDoc, statusDoc map[string]string) []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		column("Desired", "integer", 0, specDoc["replicas"]),
		column("Current", "integer", 0, statusDoc["replicas"]),
		column("Ready", "integer", 0, statusDoc["readyReplicas"]),
		ageColumn(),
		column("Containers", "string", 1, "Names of each container in the template."),
		column("Images", "string", 1, "Images referenced by each container in the template."),
		column("Selector", "string", 1, specDoc["selector"]),
	}
}

// desiredReplicas dereferences a replicas field, using the API default of 1
// when it is unset.
func desiredReplicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// containerCells returns the comma-separated names and images of containers.
func containerCells(containers []corev1.Container) (names, images string) {
	n := make([]string, len(containers))
	i := make([]string, len(containers))
	for k, c := range containers {
		n[k], i[k] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(i, ",")
}

// replicationControllerPrinter prints core/v1 ReplicationControllers as upstream:
// NAME DESIRED CURRENT READY AGE | CONTAINERS IMAGES SELECTOR.
func replicationControllerPrinter() Printer {
	specDoc := corev1.ReplicationControllerSpec{}.SwaggerDoc()
	statusDoc := corev1.ReplicationControllerStatus{}.SwaggerDoc()
	return Printer{
		Columns: replicaColumns(specDoc, statusDoc),
		Row: rowFor(func(rc *corev1.ReplicationController, now time.Time) []interface{} {
			var containers []corev1.Container
			if rc.Spec.Template != nil {
				containers = rc.Spec.Template.Spec.Containers
			}
			names, images := containerCells(containers)
			return []interface{}{
				rc.Name,
				int64(desiredReplicas(rc.Spec.Replicas)),
				int64(rc.Status.Replicas),
				int64(rc.Status.ReadyReplicas),
				translateTimestampSince(rc.CreationTimestamp, now),
				names,
				images,
				labels.FormatLabels(rc.Spec.Selector),
			}
		}),
	}
}

// podTemplatePrinter is upstream's PodTemplate table: the template's containers, images
// and pod labels.
func podTemplatePrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Containers", "string", 0, "Names of each container in the template."),
			column("Images", "string", 0, "Images referenced by each container in the template."),
			column("Pod Labels", "string", 0, "The labels for the pod template."),
		},
		Row: rowFor(func(pt *corev1.PodTemplate, _ time.Time) []interface{} {
			names, images := containerCells(pt.Template.Spec.Containers)
			return []interface{}{pt.Name, names, images, labels.FormatLabels(pt.Template.Labels)}
		}),
	}
}
