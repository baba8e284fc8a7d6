package registry

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
)

// appsResources are the apps/v1 kinds beyond Deployments and ReplicaSets: DaemonSets,
// StatefulSets and the ControllerRevisions in which both keep their history.
func appsResources() []*Resource {
	return []*Resource{
		{
			GroupVersion: appsV1, Kind: "ControllerRevision", ListKind: "ControllerRevisionList",
			Plural: "controllerrevisions", Singular: "controllerrevision", Namespaced: true,
			StoragePrefix: "/registry/controllerrevisions",
			New:           func() runtime.Object { return &appsv1.ControllerRevision{} },
			NewList:       func() runtime.Object { return &appsv1.ControllerRevisionList{} },
		},
		{
			GroupVersion: appsV1, Kind: "DaemonSet", ListKind: "DaemonSetList", Plural: "daemonsets", Singular: "daemonset", Namespaced: true,
			ShortNames: []string{"ds"}, Categories: []string{"all"}, StoragePrefix: "/registry/daemonsets", Subresources: []string{"status"},
			Strategy: Strategy{PrepareForCreate: prepareDaemonSetForCreate, PrepareForUpdate: prepareDaemonSetForUpdate},
			New:      func() runtime.Object { return &appsv1.DaemonSet{} }, NewList: func() runtime.Object { return &appsv1.DaemonSetList{} },
		},
		{
			GroupVersion: appsV1, Kind: "StatefulSet", ListKind: "StatefulSetList", Plural: "statefulsets", Singular: "statefulset", Namespaced: true,
			ShortNames: []string{"sts"}, Categories: []string{"all"}, StoragePrefix: "/registry/statefulsets", Subresources: []string{"status", "scale"},
			Strategy: Strategy{Scale: statefulSetScale()},
			New:      func() runtime.Object { return &appsv1.StatefulSet{} }, NewList: func() runtime.Object { return &appsv1.StatefulSetList{} },
		},
	}
}

// prepareDaemonSetForCreate clears the status and starts the template generation at 1:
// apps/v1 carries it in the deprecated.daemonset.template.generation annotation, which
// the DaemonSet controller copies into its pods' pod-template-generation label.
func prepareDaemonSetForCreate(obj runtime.Object) {
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		return
	}
	ds.Status = appsv1.DaemonSetStatus{}
	setTemplateGeneration(ds, 1)
}

// prepareDaemonSetForUpdate moves the template generation on when the pod template
// changes, and otherwise keeps the stored one, whatever the request says.
func prepareDaemonSetForUpdate(obj, old runtime.Object) {
	ds, ok1 := obj.(*appsv1.DaemonSet)
	prev, ok2 := old.(*appsv1.DaemonSet)
	if !ok1 || !ok2 {
		return
	}
	gen := templateGeneration(prev)
	if !equality.Semantic.DeepEqual(ds.Spec.Template, prev.Spec.Template) {
		gen++
	}
	setTemplateGeneration(ds, gen)
}

// templateGeneration reads a DaemonSet's template generation (0 when absent or invalid).
func templateGeneration(ds *appsv1.DaemonSet) int64 {
	n, err := strconv.ParseInt(ds.Annotations[appsv1.DeprecatedTemplateGeneration], 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func setTemplateGeneration(ds *appsv1.DaemonSet, gen int64) {
	if ds.Annotations == nil {
		ds.Annotations = map[string]string{}
	}
	ds.Annotations[appsv1.DeprecatedTemplateGeneration] = strconv.FormatInt(gen, 10)
}
