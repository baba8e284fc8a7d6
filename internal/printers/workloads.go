package printers

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	appsv1beta1 "k8s.io/api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// daemonSetPrinter prints daemon sets as upstream: NAME DESIRED CURRENT READY
// UP-TO-DATE AVAILABLE NODE SELECTOR AGE | CONTAINERS IMAGES SELECTOR.
func daemonSetPrinter() Printer {
	// Descriptions come from extensions/v1beta1, as in kube-apiserver.
	statusDoc := extensionsv1beta1.DaemonSetStatus{}.SwaggerDoc()
	specDoc := extensionsv1beta1.DaemonSetSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Desired", "integer", 0, statusDoc["desiredNumberScheduled"]),
			column("Current", "integer", 0, statusDoc["currentNumberScheduled"]),
			column("Ready", "integer", 0, statusDoc["numberReady"]),
			column("Up-to-date", "integer", 0, statusDoc["updatedNumberScheduled"]),
			column("Available", "integer", 0, statusDoc["numberAvailable"]),
			column("Node Selector", "string", 0, corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]),
			ageColumn(),
			column("Containers", "string", 1, "Names of each container in the template."),
			column("Images", "string", 1, "Images referenced by each container in the template."),
			column("Selector", "string", 1, specDoc["selector"]),
		},
		Row: rowFor(func(ds *appsv1.DaemonSet, now time.Time) []interface{} {
			names, images := containerCells(ds.Spec.Template.Spec.Containers)
			return []interface{}{
				ds.Name,
				int64(ds.Status.DesiredNumberScheduled),
				int64(ds.Status.CurrentNumberScheduled),
				int64(ds.Status.NumberReady),
				int64(ds.Status.UpdatedNumberScheduled),
				int64(ds.Status.NumberAvailable),
				labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector),
				translateTimestampSince(ds.CreationTimestamp, now),
				names,
				images,
				metav1.FormatLabelSelector(ds.Spec.Selector),
			}
		}),
	}
}

// statefulSetPrinter prints stateful sets as upstream: NAME READY AGE | CONTAINERS IMAGES.
func statefulSetPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Ready", "string", 0, "Number of the pod with ready state"),
			ageColumn(),
			column("Containers", "string", 1, "Names of each container in the template."),
			column("Images", "string", 1, "Images referenced by each container in the template."),
		},
		Row: rowFor(func(ss *appsv1.StatefulSet, now time.Time) []interface{} {
			names, images := containerCells(ss.Spec.Template.Spec.Containers)
			return []interface{}{
				ss.Name,
				fmt.Sprintf("%d/%d", int64(ss.Status.ReadyReplicas), int64(desiredReplicas(ss.Spec.Replicas))),
				translateTimestampSince(ss.CreationTimestamp, now),
				names,
				images,
			}
		}),
	}
}

// controllerRevisionPrinter prints controller revisions as upstream: NAME CONTROLLER
// REVISION AGE, the controller as kind.group/name ("daemonset.apps/fluentd").
func controllerRevisionPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Controller", "string", 0, "Controller of the object"),
			column("Revision", "integer", 0, appsv1beta1.ControllerRevision{}.SwaggerDoc()["revision"]),
			ageColumn(),
		},
		Row: rowFor(func(r *appsv1.ControllerRevision, now time.Time) []interface{} {
			controller := "<none>"
			if ref := metav1.GetControllerOf(r); ref != nil {
				gv, err := schema.ParseGroupVersion(ref.APIVersion)
				if err == nil {
					controller = strings.ToLower(gv.WithKind(ref.Kind).GroupKind().String()) + "/" + ref.Name
				}
			}
			return []interface{}{r.Name, controller, r.Revision, translateTimestampSince(r.CreationTimestamp, now)}
		}),
	}
}
