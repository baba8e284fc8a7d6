package openapi

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// testResources is a realistic set of ~20 served resources.
func testResources() []Resource {
	return []Resource{
		{GVK: corev1.SchemeGroupVersion.WithKind("Pod"), Plural: "pods", Namespaced: true,
			Object: &corev1.Pod{}, List: &corev1.PodList{},
			Subresources: []string{"status", "binding", "log", "eviction", "ephemeralcontainers", "exec", "attach", "portforward"}},
		{GVK: corev1.SchemeGroupVersion.WithKind("Namespace"), Plural: "namespaces",
			Object: &corev1.Namespace{}, List: &corev1.NamespaceList{}, Subresources: []string{"status", "finalize"}},
		{GVK: corev1.SchemeGroupVersion.WithKind("Node"), Plural: "nodes",
			Object: &corev1.Node{}, List: &corev1.NodeList{}, Subresources: []string{"status", "proxy"}},
		{GVK: corev1.SchemeGroupVersion.WithKind("Service"), Plural: "services", Namespaced: true,
			Object: &corev1.Service{}, List: &corev1.ServiceList{}, Subresources: []string{"status"}},
		{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Plural: "configmaps", Namespaced: true,
			Object: &corev1.ConfigMap{}, List: &corev1.ConfigMapList{}},
		{GVK: corev1.SchemeGroupVersion.WithKind("Secret"), Plural: "secrets", Namespaced: true,
			Object: &corev1.Secret{}, List: &corev1.SecretList{}},
		{GVK: corev1.SchemeGroupVersion.WithKind("ServiceAccount"), Plural: "serviceaccounts", Namespaced: true,
			Object: &corev1.ServiceAccount{}, List: &corev1.ServiceAccountList{}},
		{GVK: corev1.SchemeGroupVersion.WithKind("Event"), Plural: "events", Namespaced: true,
			Object: &corev1.Event{}, List: &corev1.EventList{}},
		{GVK: corev1.SchemeGroupVersion.WithKind("Endpoints"), Plural: "endpoints", Namespaced: true,
			Object: &corev1.Endpoints{}, List: &corev1.EndpointsList{}},
		{GVK: corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"), Plural: "persistentvolumeclaims", Namespaced: true,
			Object: &corev1.PersistentVolumeClaim{}, List: &corev1.PersistentVolumeClaimList{}, Subresources: []string{"status"}},
		{GVK: corev1.SchemeGroupVersion.WithKind("Binding"), Plural: "bindings", Namespaced: true,
			Object: &corev1.Binding{}, Verbs: []string{"create"}},
		{GVK: appsv1.SchemeGroupVersion.WithKind("Deployment"), Plural: "deployments", Namespaced: true,
			Object: &appsv1.Deployment{}, List: &appsv1.DeploymentList{}, Subresources: []string{"status", "scale"}},
		{GVK: appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), Plural: "replicasets", Namespaced: true,
			Object: &appsv1.ReplicaSet{}, List: &appsv1.ReplicaSetList{}, Subresources: []string{"status", "scale"}},
		{GVK: appsv1.SchemeGroupVersion.WithKind("StatefulSet"), Plural: "statefulsets", Namespaced: true,
			Object: &appsv1.StatefulSet{}, List: &appsv1.StatefulSetList{}, Subresources: []string{"status", "scale"}},
		{GVK: appsv1.SchemeGroupVersion.WithKind("DaemonSet"), Plural: "daemonsets", Namespaced: true,
			Object: &appsv1.DaemonSet{}, List: &appsv1.DaemonSetList{}, Subresources: []string{"status"}},
		{GVK: appsv1.SchemeGroupVersion.WithKind("ControllerRevision"), Plural: "controllerrevisions", Namespaced: true,
			Object: &appsv1.ControllerRevision{}, List: &appsv1.ControllerRevisionList{}},
		{GVK: batchv1.SchemeGroupVersion.WithKind("Job"), Plural: "jobs", Namespaced: true,
			Object: &batchv1.Job{}, List: &batchv1.JobList{}, Subresources: []string{"status"}},
		{GVK: batchv1.SchemeGroupVersion.WithKind("CronJob"), Plural: "cronjobs", Namespaced: true,
			Object: &batchv1.CronJob{}, List: &batchv1.CronJobList{}, Subresources: []string{"status"}},
		{GVK: coordinationv1.SchemeGroupVersion.WithKind("Lease"), Plural: "leases", Namespaced: true,
			Object: &coordinationv1.Lease{}, List: &coordinationv1.LeaseList{}},
		{GVK: rbacv1.SchemeGroupVersion.WithKind("Role"), Plural: "roles", Namespaced: true,
			Object: &rbacv1.Role{}, List: &rbacv1.RoleList{}},
		{GVK: rbacv1.SchemeGroupVersion.WithKind("ClusterRole"), Plural: "clusterroles",
			Object: &rbacv1.ClusterRole{}, List: &rbacv1.ClusterRoleList{}},
	}
}
