package registry

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// appsResources are the apps/v1 kinds beyond Deployments and ReplicaSets: the
// ControllerRevisions in which DaemonSets and StatefulSets keep their history.
func appsResources() []*Resource {
	return []*Resource{
		{
			GroupVersion: appsV1, Kind: "ControllerRevision", ListKind: "ControllerRevisionList",
			Plural: "controllerrevisions", Singular: "controllerrevision", Namespaced: true,
			StoragePrefix: "/registry/controllerrevisions",
			New:           func() runtime.Object { return &appsv1.ControllerRevision{} },
			NewList:       func() runtime.Object { return &appsv1.ControllerRevisionList{} },
		},
	}
}
