// Package printers implements server-side printing: it turns stored objects
// into the meta.k8s.io/v1 Table that kubectl get asks the API server for.
//
// Every supported kind has a Printer whose columns, column descriptions,
// priorities and cell values follow upstream kube-apiserver
// (pkg/printers/internalversion), adapted to the external k8s.io/api types.
// Like kube-apiserver, the printers always produce the "wide" set of cells;
// columns with Priority 1 are hidden by kubectl unless -o wide is given.
//
// The package holds no mutable state: For builds a fresh Printer on every
// call, so callers may modify what they get back.
package printers

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Printer builds table columns and rows for one kind.
type Printer struct {
	// Columns describes the table columns, in cell order.
	Columns []metav1.TableColumnDefinition
	// Row returns the cells of one object (len == len(Columns)), given the current time for ages.
	Row func(obj runtime.Object, now time.Time) ([]interface{}, error)
	// Conditions optionally returns the row conditions of one object (for
	// pods, the "Completed" condition of succeeded and failed pods). Nil
	// means rows carry no conditions.
	Conditions func(obj runtime.Object) []metav1.TableRowCondition
}

// For returns the printer for a group/resource (e.g. {Group:"apps", Resource:"deployments"}), ok=false if none.
func For(gr schema.GroupResource) (Printer, bool) {
	switch gr.Group {
	case "":
		switch gr.Resource {
		case "pods":
			return podPrinter(), true
		case "persistentvolumes":
			return persistentVolumePrinter(), true
		case "persistentvolumeclaims":
			return persistentVolumeClaimPrinter(), true
		case "nodes":
			return nodePrinter(), true
		case "namespaces":
			return namespacePrinter(), true
		case "services":
			return servicePrinter(), true
		case "endpoints":
			return endpointsPrinter(), true
		case "configmaps":
			return configMapPrinter(), true
		case "secrets":
			return secretPrinter(), true
		case "serviceaccounts":
			return serviceAccountPrinter(), true
		case "events":
			return eventPrinter(), true
		case "replicationcontrollers":
			return replicationControllerPrinter(), true
		case "podtemplates":
			return podTemplatePrinter(), true
		}
	case "events.k8s.io":
		if gr.Resource == "events" {
			return eventPrinter(), true
		}
	case "apps":
		switch gr.Resource {
		case "deployments":
			return deploymentPrinter(), true
		case "replicasets":
			return replicaSetPrinter(), true
		case "daemonsets":
			return daemonSetPrinter(), true
		case "statefulsets":
			return statefulSetPrinter(), true
		case "controllerrevisions":
			return controllerRevisionPrinter(), true
		}
	case "batch":
		switch gr.Resource {
		case "jobs":
			return jobPrinter(), true
		case "cronjobs":
			return cronJobPrinter(), true
		}
	case "discovery.k8s.io":
		if gr.Resource == "endpointslices" {
			return endpointSlicePrinter(), true
		}
	case "networking.k8s.io":
		switch gr.Resource {
		case "ingresses":
			return ingressPrinter(), true
		case "ingressclasses":
			return ingressClassPrinter(), true
		}
	case "coordination.k8s.io":
		if gr.Resource == "leases" {
			return leasePrinter(), true
		}
	case "certificates.k8s.io":
		if gr.Resource == "certificatesigningrequests" {
			return csrPrinter(), true
		}
	case "flowcontrol.apiserver.k8s.io":
		switch gr.Resource {
		case "flowschemas":
			return flowSchemaPrinter(), true
		case "prioritylevelconfigurations":
			return priorityLevelPrinter(), true
		}
	case "admissionregistration.k8s.io":
		switch gr.Resource {
		case "validatingwebhookconfigurations":
			return validatingWebhookConfigurationPrinter(), true
		case "mutatingwebhookconfigurations":
			return mutatingWebhookConfigurationPrinter(), true
		case "validatingadmissionpolicies":
			return validatingAdmissionPolicyPrinter(), true
		case "validatingadmissionpolicybindings":
			return validatingAdmissionPolicyBindingPrinter(), true
		}
	case "apiextensions.k8s.io":
		if gr.Resource == "customresourcedefinitions" {
			return createdAtPrinter(), true
		}
	case "apiregistration.k8s.io":
		if gr.Resource == "apiservices" {
			return apiServicePrinter(), true
		}
	case "storage.k8s.io":
		switch gr.Resource {
		case "storageclasses":
			return storageClassPrinter(), true
		case "volumeattachments":
			return volumeAttachmentPrinter(), true
		case "csinodes":
			return csiNodePrinter(), true
		case "csistoragecapacities":
			return csiStorageCapacityPrinter(), true
		}
	case "autoscaling":
		if gr.Resource == "horizontalpodautoscalers" {
			return hpaPrinter(), true
		}
	case "policy":
		if gr.Resource == "poddisruptionbudgets" {
			return pdbPrinter(), true
		}
	case "node.k8s.io":
		if gr.Resource == "runtimeclasses" {
			return runtimeClassPrinter(), true
		}
	case "metrics.k8s.io":
		switch gr.Resource {
		case "nodes":
			return nodeMetricsPrinter(), true
		case "pods":
			return podMetricsPrinter(), true
		}
	case "rbac.authorization.k8s.io":
		switch gr.Resource {
		case "roles", "clusterroles":
			return createdAtPrinter(), true
		case "rolebindings":
			return roleBindingPrinter(), true
		case "clusterrolebindings":
			return clusterRoleBindingPrinter(), true
		}
	}
	return Printer{}, false
}

// Table builds a Table from objects using the printer; rows carry no Object (the caller fills row.Object).
//
// The returned table has its TypeMeta set to meta.k8s.io/v1 Table and a
// non-nil (possibly empty) Rows slice. It is an error for the printer to
// return a number of cells different from the number of columns.
func Table(p Printer, objs []runtime.Object, now time.Time) (*metav1.Table, error) {
	if p.Row == nil {
		return nil, fmt.Errorf("printers: printer has no Row function")
	}
	table := &metav1.Table{
		TypeMeta: metav1.TypeMeta{
			APIVersion: metav1.SchemeGroupVersion.String(),
			Kind:       "Table",
		},
		ColumnDefinitions: append([]metav1.TableColumnDefinition(nil), p.Columns...),
		Rows:              make([]metav1.TableRow, 0, len(objs)),
	}
	for i, obj := range objs {
		cells, err := p.Row(obj, now)
		if err != nil {
			return nil, err
		}
		if len(cells) != len(p.Columns) {
			return nil, fmt.Errorf("printers: row %d has %d cells, want %d", i, len(cells), len(p.Columns))
		}
		row := metav1.TableRow{Cells: cells}
		if p.Conditions != nil {
			row.Conditions = p.Conditions(obj)
		}
		table.Rows = append(table.Rows, row)
	}
	return table, nil
}

// Default is the printer for kinds without their own: NAME, AGE (from metadata).
func Default() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{nameColumn(), ageColumn()},
		Row: func(obj runtime.Object, now time.Time) ([]interface{}, error) {
			m, err := meta.Accessor(obj)
			if err != nil {
				return nil, fmt.Errorf("printers: %T has no object metadata: %w", obj, err)
			}
			return []interface{}{m.GetName(), translateTimestampSince(m.GetCreationTimestamp(), now)}, nil
		},
	}
}

// objectMetaDoc returns the swagger descriptions of ObjectMeta fields.
func objectMetaDoc() map[string]string {
	return metav1.ObjectMeta{}.SwaggerDoc()
}

// nameColumn is the NAME column shared by every printer.
func nameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc()["name"]}
}

// ageColumn is the AGE column shared by most printers.
func ageColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: objectMetaDoc()["creationTimestamp"]}
}

// column builds a column definition with the given name, type, priority and description.
func column(name, typ string, priority int32, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Priority: priority, Description: description}
}

// translateTimestampSince renders the time elapsed between ts and now the way
// kubectl shows ages ("5m", "2d3h"); a zero timestamp yields "<unknown>".
func translateTimestampSince(ts metav1.Time, now time.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(ts.Time))
}

// translateMicroTimestampSince is translateTimestampSince for MicroTime.
func translateMicroTimestampSince(ts metav1.MicroTime, now time.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(ts.Time))
}

// asType returns obj as *T. It accepts *T itself (a nil *T is treated as a
// zero-valued object) and unstructured objects, which are converted.
func asType[T any, PT interface {
	*T
	runtime.Object
}](obj runtime.Object) (PT, error) {
	switch o := obj.(type) {
	case PT:
		if o == nil {
			return PT(new(T)), nil
		}
		return o, nil
	case runtime.Unstructured:
		out := PT(new(T))
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.UnstructuredContent(), out); err != nil {
			return nil, fmt.Errorf("printers: converting unstructured object to %T: %w", out, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("printers: expected %T, got %T", PT(nil), obj)
}

// rowFor adapts a typed cell function into a Printer.Row function.
func rowFor[T any, PT interface {
	*T
	runtime.Object
}](cells func(o PT, now time.Time) []interface{}) func(runtime.Object, time.Time) ([]interface{}, error) {
	return func(obj runtime.Object, now time.Time) ([]interface{}, error) {
		o, err := asType[T, PT](obj)
		if err != nil {
			return nil, err
		}
		return cells(o, now), nil
	}
}
