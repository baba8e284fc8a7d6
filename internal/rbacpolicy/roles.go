package rbacpolicy

import rbacv1 "k8s.io/api/rbac/v1"

// clusterRoleDefs are upstream's ClusterRoles other than the controllers': the
// user-facing roles (cluster-admin, and admin, edit and view aggregated from the
// system:aggregate-to-* roles), discovery and the roles of the components.
func clusterRoleDefs() []roleDef {
	return []roleDef{
		{name: "admin", aggregate: "aggregate-to-admin", rules: []rule{}},
		{name: "cluster-admin", rules: []rule{
			r("*", "*", "*"),
			urls("*", "*"),
		}},
		{name: "edit", aggregate: "aggregate-to-edit", aggregateTo: "aggregate-to-admin", rules: []rule{}},
		{name: "system:aggregate-to-admin", aggregateTo: "aggregate-to-admin", rules: []rule{
			r("create", "authorization.k8s.io", "localsubjectaccessreviews"),
			r("create delete deletecollection get list patch update watch", "rbac.authorization.k8s.io", "rolebindings roles"),
		}},
		{name: "system:aggregate-to-edit", aggregateTo: "aggregate-to-edit", rules: []rule{
			r("read", "core", "pods/attach pods/exec pods/portforward pods/proxy secrets services/proxy"),
			r("impersonate", "core", "serviceaccounts"),
			r("create delete deletecollection patch update", "core", "pods pods/attach pods/exec pods/portforward pods/proxy"),
			r("create", "core", "pods/eviction"),
			r("create delete deletecollection patch update", "core", "configmaps events persistentvolumeclaims replicationcontrollers replicationcontrollers/scale secrets serviceaccounts services services/proxy"),
			r("create", "core", "serviceaccounts/token"),
			r("create delete deletecollection patch update", "apps", "daemonsets deployments deployments/rollback deployments/scale replicasets replicasets/scale statefulsets statefulsets/scale"),
			r("create delete deletecollection patch update", "autoscaling", "horizontalpodautoscalers"),
			r("create delete deletecollection patch update", "batch", "cronjobs jobs"),
			r("create delete deletecollection patch update", "extensions", "daemonsets deployments deployments/rollback deployments/scale ingresses networkpolicies replicasets replicasets/scale replicationcontrollers/scale"),
			r("create delete deletecollection patch update", "policy", "poddisruptionbudgets"),
			r("create delete deletecollection patch update", "networking.k8s.io", "ingresses networkpolicies"),
			r("create delete deletecollection get list patch update watch", "coordination.k8s.io", "leases"),
		}},
		{name: "system:aggregate-to-view", aggregateTo: "aggregate-to-view", rules: []rule{
			r("read", "core", "configmaps endpoints persistentvolumeclaims persistentvolumeclaims/status pods replicationcontrollers replicationcontrollers/scale serviceaccounts services services/status"),
			r("read", "core", "bindings events limitranges namespaces/status pods/log pods/status replicationcontrollers/status resourcequotas resourcequotas/status"),
			r("read", "core", "namespaces"),
			r("read", "discovery.k8s.io", "endpointslices"),
			r("read", "apps", "controllerrevisions daemonsets daemonsets/status deployments deployments/scale deployments/status replicasets replicasets/scale replicasets/status statefulsets statefulsets/scale statefulsets/status"),
			r("read", "autoscaling", "horizontalpodautoscalers horizontalpodautoscalers/status"),
			r("read", "batch", "cronjobs cronjobs/status jobs jobs/status"),
			r("read", "extensions", "daemonsets daemonsets/status deployments deployments/scale deployments/status ingresses ingresses/status networkpolicies replicasets replicasets/scale replicasets/status replicationcontrollers/scale"),
			r("read", "policy", "poddisruptionbudgets poddisruptionbudgets/status"),
			r("read", "networking.k8s.io", "ingresses ingresses/status networkpolicies"),
		}},
		{name: "system:auth-delegator", rules: []rule{
			r("create", "authentication.k8s.io", "tokenreviews"),
			r("create", "authorization.k8s.io", "subjectaccessreviews"),
		}},
		{name: "system:basic-user", rules: []rule{
			r("create", "authorization.k8s.io", "selfsubjectaccessreviews selfsubjectrulesreviews"),
			r("create", "authentication.k8s.io", "selfsubjectreviews"),
		}},
		{name: "system:certificates.k8s.io:certificatesigningrequests:nodeclient", rules: []rule{
			r("create", "certificates.k8s.io", "certificatesigningrequests/nodeclient"),
		}},
		{name: "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", rules: []rule{
			r("create", "certificates.k8s.io", "certificatesigningrequests/selfnodeclient"),
		}},
		{name: "system:certificates.k8s.io:kube-apiserver-client-approver", rules: []rule{
			r("approve", "certificates.k8s.io", "signers").named("kubernetes.io/kube-apiserver-client"),
		}},
		{name: "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver", rules: []rule{
			r("approve", "certificates.k8s.io", "signers").named("kubernetes.io/kube-apiserver-client-kubelet"),
		}},
		{name: "system:certificates.k8s.io:kubelet-serving-approver", rules: []rule{
			r("approve", "certificates.k8s.io", "signers").named("kubernetes.io/kubelet-serving"),
		}},
		{name: "system:certificates.k8s.io:legacy-unknown-approver", rules: []rule{
			r("approve", "certificates.k8s.io", "signers").named("kubernetes.io/legacy-unknown"),
		}},
		{name: "system:discovery", rules: []rule{
			urls("get", "/api /api/* /apis /apis/* /healthz /livez /openapi /openapi/* /readyz /version /version/"),
		}},
		{name: "system:heapster", rules: []rule{
			r("read", "core", "events namespaces nodes pods"),
			r("read", "extensions", "deployments"),
		}},
		{name: "system:kube-aggregator", rules: []rule{
			r("read", "core", "endpoints services"),
		}},
		{name: "system:kube-controller-manager", rules: []rule{
			eventsRule(),
			r("create", "coordination.k8s.io", "leases"),
			r("get update", "coordination.k8s.io", "leases").named("kube-controller-manager"),
			r("create", "core", "secrets serviceaccounts"),
			r("delete", "core", "secrets"),
			r("get", "core", "configmaps namespaces secrets serviceaccounts"),
			r("update", "core", "secrets serviceaccounts"),
			r("create", "authentication.k8s.io", "tokenreviews"),
			r("create", "authorization.k8s.io", "subjectaccessreviews"),
			r("list watch", "*", "*"),
			r("create", "core", "serviceaccounts/token"),
		}},
		{name: "system:kube-dns", rules: []rule{
			r("list watch", "core", "endpoints services"),
		}},
		{name: "system:kube-scheduler", rules: []rule{
			eventsRule(),
			r("create", "coordination.k8s.io", "leases"),
			r("get list update watch", "coordination.k8s.io", "leases").named("kube-scheduler"),
			r("create delete deletecollection get list patch update watch", "coordination.k8s.io", "leasecandidates"),
			r("read", "core", "nodes"),
			r("delete read", "core", "pods"),
			r("create", "core", "bindings pods/binding"),
			r("patch update", "core", "pods/status"),
			r("read", "core", "replicationcontrollers services"),
			r("read", "apps extensions", "replicasets"),
			r("read", "apps", "statefulsets"),
			r("read", "policy", "poddisruptionbudgets"),
			r("read", "core", "persistentvolumeclaims persistentvolumes"),
			r("create", "authentication.k8s.io", "tokenreviews"),
			r("create", "authorization.k8s.io", "subjectaccessreviews"),
			r("read", "storage.k8s.io", "csinodes"),
			r("read", "storage.k8s.io", "volumeattachments"),
			r("read", "core", "namespaces"),
			r("read", "storage.k8s.io", "csidrivers"),
			r("read", "storage.k8s.io", "csistoragecapacities"),
		}},
		{name: "system:kubelet-api-admin", rules: []rule{
			r("read", "core", "nodes"),
			r("proxy", "core", "nodes"),
			r("*", "core", "nodes/log nodes/metrics nodes/proxy nodes/stats"),
		}},
		{name: "system:monitoring", rules: []rule{
			urls("get", "/healthz /healthz/* /livez /livez/* /metrics /metrics/slis /readyz /readyz/*"),
		}},
		{name: "system:node", rules: []rule{
			r("create", "authentication.k8s.io", "tokenreviews"),
			r("create", "authorization.k8s.io", "localsubjectaccessreviews subjectaccessreviews"),
			r("read", "core", "services"),
			r("create read", "core", "nodes"),
			r("patch update", "core", "nodes/status"),
			r("patch update", "core", "nodes"),
			r("create patch update", "core", "events"),
			r("read", "core", "pods"),
			r("create delete", "core", "pods"),
			r("patch update", "core", "pods/status"),
			r("create", "core", "pods/eviction"),
			r("read", "core", "configmaps secrets"),
			r("get", "core", "persistentvolumeclaims persistentvolumes"),
			r("get", "core", "endpoints"),
			r("create read", "certificates.k8s.io", "certificatesigningrequests"),
			r("create delete get patch update", "coordination.k8s.io", "leases"),
			r("get", "storage.k8s.io", "volumeattachments"),
			r("create", "core", "serviceaccounts/token"),
			r("get patch update", "core", "persistentvolumeclaims/status"),
			r("read", "storage.k8s.io", "csidrivers"),
			r("create delete get patch update", "storage.k8s.io", "csinodes"),
			r("read", "node.k8s.io", "runtimeclasses"),
		}},
		{name: "system:node-bootstrapper", rules: []rule{
			r("create read", "certificates.k8s.io", "certificatesigningrequests"),
		}},
		{name: "system:node-problem-detector", rules: []rule{
			r("get", "core", "nodes"),
			r("patch", "core", "nodes/status"),
			eventsRule(),
		}},
		{name: "system:node-proxier", rules: []rule{
			r("list watch", "core", "endpoints services"),
			r("read", "core", "nodes"),
			eventsRule(),
			r("list watch", "discovery.k8s.io", "endpointslices"),
		}},
		{name: "system:persistent-volume-provisioner", rules: []rule{
			r("create delete read", "core", "persistentvolumes"),
			r("get list update watch", "core", "persistentvolumeclaims"),
			r("read", "storage.k8s.io", "storageclasses"),
			r("watch", "core", "events"),
			eventsRule(),
		}},
		{name: "system:public-info-viewer", rules: []rule{
			urls("get", "/healthz /livez /readyz /version /version/"),
		}},
		{name: "system:service-account-issuer-discovery", rules: []rule{
			urls("get", "/.well-known/openid-configuration /.well-known/openid-configuration/ /openid/v1/jwks /openid/v1/jwks/"),
		}},
		{name: "system:volume-scheduler", rules: []rule{
			r("get list patch update watch", "core", "persistentvolumes"),
			r("read", "storage.k8s.io", "storageclasses"),
			r("get list patch update watch", "core", "persistentvolumeclaims"),
		}},
		{name: "view", aggregate: "aggregate-to-view", aggregateTo: "aggregate-to-edit", rules: []rule{}},
	}
}

// controllerRoleDefs are the roles of upstream's controllers, by the name of the
// controller's ServiceAccount in kube-system (the role is system:controller:NAME).
func controllerRoleDefs() []roleDef {
	return []roleDef{
		{name: "attachdetach-controller", rules: []rule{
			r("list watch", "core", "persistentvolumeclaims persistentvolumes"),
			r("read", "core", "nodes"),
			r("patch update", "core", "nodes/status"),
			r("list watch", "core", "pods"),
			eventsRule(),
			r("create delete read", "storage.k8s.io", "volumeattachments"),
			r("read", "storage.k8s.io", "csidrivers"),
			r("read", "storage.k8s.io", "csinodes"),
		}},
		{name: "certificate-controller", rules: []rule{
			r("delete read", "certificates.k8s.io", "certificatesigningrequests"),
			r("update", "certificates.k8s.io", "certificatesigningrequests/approval certificatesigningrequests/status"),
			r("approve", "certificates.k8s.io", "signers").named("kubernetes.io/kube-apiserver-client-kubelet"),
			r("sign", "certificates.k8s.io", "signers").named("kubernetes.io/kube-apiserver-client kubernetes.io/kube-apiserver-client-kubelet kubernetes.io/kubelet-serving kubernetes.io/legacy-unknown"),
			r("create", "authorization.k8s.io", "subjectaccessreviews"),
			eventsRule(),
		}},
		{name: "clusterrole-aggregation-controller", rules: []rule{
			r("escalate get list patch update watch", "rbac.authorization.k8s.io", "clusterroles"),
		}},
		{name: "cronjob-controller", rules: []rule{
			r("get list update watch", "batch", "cronjobs"),
			r("create delete get list patch update watch", "batch", "jobs"),
			r("update", "batch", "cronjobs/status"),
			r("update", "batch", "cronjobs/finalizers"),
			r("delete list watch", "core", "pods"),
			eventsRule(),
		}},
		{name: "daemon-set-controller", rules: []rule{
			r("read", "apps extensions", "daemonsets"),
			r("update", "apps extensions", "daemonsets/status"),
			r("update", "apps extensions", "daemonsets/finalizers"),
			r("list watch", "core", "nodes"),
			r("create delete list patch watch", "core", "pods"),
			r("create", "core", "pods/binding"),
			r("create delete get list patch update watch", "apps", "controllerrevisions"),
			eventsRule(),
		}},
		{name: "deployment-controller", rules: []rule{
			r("get list update watch", "apps extensions", "deployments"),
			r("update", "apps extensions", "deployments/status"),
			r("update", "apps extensions", "deployments/finalizers"),
			r("create delete get list patch update watch", "apps extensions", "replicasets"),
			r("get list update watch", "core", "pods"),
			eventsRule(),
		}},
		{name: "disruption-controller", rules: []rule{
			r("read", "apps extensions", "deployments"),
			r("read", "apps extensions", "replicasets"),
			r("read", "core", "replicationcontrollers"),
			r("read", "policy", "poddisruptionbudgets"),
			r("read", "apps", "statefulsets"),
			r("update", "policy", "poddisruptionbudgets/status"),
			r("patch update", "core", "pods/status"),
			r("get", "*", "*/scale"),
			eventsRule(),
		}},
		{name: "endpoint-controller", rules: []rule{
			r("read", "core", "pods services"),
			r("create delete get list update watch", "core", "endpoints"),
			r("create", "core", "endpoints/restricted"),
			eventsRule(),
		}},
		{name: "endpointslice-controller", rules: []rule{
			r("read", "core", "nodes pods services"),
			r("update", "core", "services/finalizers"),
			r("create delete get list update watch", "discovery.k8s.io", "endpointslices"),
			eventsRule(),
		}},
		{name: "endpointslicemirroring-controller", rules: []rule{
			r("read", "core", "endpoints services"),
			r("update", "core", "services/finalizers"),
			r("update", "core", "endpoints/finalizers"),
			r("create delete get list update watch", "discovery.k8s.io", "endpointslices"),
			eventsRule(),
		}},
		{name: "ephemeral-volume-controller", rules: []rule{
			r("read", "core", "pods"),
			r("update", "core", "pods/finalizers"),
			r("create read", "core", "persistentvolumeclaims"),
			eventsRule(),
		}},
		{name: "expand-controller", rules: []rule{
			r("get list patch update watch", "core", "persistentvolumes"),
			r("patch update", "core", "persistentvolumeclaims/status"),
			r("read", "core", "persistentvolumeclaims"),
			eventsRule(),
			r("get", "core", "services"),
		}},
		{name: "generic-garbage-collector", rules: []rule{
			r("delete get list patch update watch", "*", "*"),
			eventsRule(),
		}},
		{name: "horizontal-pod-autoscaler", rules: []rule{
			r("read", "autoscaling", "horizontalpodautoscalers"),
			r("update", "autoscaling", "horizontalpodautoscalers/status"),
			r("get update", "*", "*/scale"),
			r("list watch", "core", "pods"),
			r("list watch", "metrics.k8s.io", "pods"),
			r("read", "custom.metrics.k8s.io", "*"),
			r("read", "external.metrics.k8s.io", "*"),
			eventsRule(),
		}},
		{name: "job-controller", rules: []rule{
			r("get list patch update watch", "batch", "jobs"),
			r("update", "batch", "jobs/status"),
			r("update", "batch", "jobs/finalizers"),
			r("create delete list patch watch", "core", "pods"),
			eventsRule(),
		}},
		{name: "legacy-service-account-token-cleaner", rules: []rule{
			r("get", "core", "configmaps").named("kube-apiserver-legacy-service-account-token-tracking"),
			r("delete patch", "core", "secrets"),
		}},
		{name: "namespace-controller", rules: []rule{
			r("delete read", "core", "namespaces"),
			r("update", "core", "namespaces/finalize namespaces/status"),
			r("delete deletecollection read", "*", "*"),
		}},
		{name: "node-controller", rules: []rule{
			r("delete get list patch update watch", "core", "nodes"),
			r("patch update", "core", "nodes/status"),
			r("patch update", "core", "pods/status"),
			r("delete read", "core", "pods"),
			eventsRule(),
		}},
		{name: "persistent-volume-binder", rules: []rule{
			r("create delete get list update watch", "core", "persistentvolumes"),
			r("update", "core", "persistentvolumes/status"),
			r("get list update watch", "core", "persistentvolumeclaims"),
			r("update", "core", "persistentvolumeclaims/status"),
			r("create delete read", "core", "pods"),
			r("read", "storage.k8s.io", "storageclasses"),
			r("list watch", "core", "nodes"),
			eventsRule(),
			r("watch", "core", "events"),
			r("get", "core", "services"),
		}},
		{name: "pod-garbage-collector", rules: []rule{
			r("delete list watch", "core", "pods"),
			r("read", "core", "nodes"),
			r("patch", "core", "pods/status"),
		}},
		{name: "pv-protection-controller", rules: []rule{
			r("get list update watch", "core", "persistentvolumes"),
			eventsRule(),
		}},
		{name: "pvc-protection-controller", rules: []rule{
			r("get list update watch", "core", "persistentvolumeclaims"),
			r("read", "core", "pods"),
			eventsRule(),
		}},
		{name: "replicaset-controller", rules: []rule{
			r("get list update watch", "apps extensions", "replicasets"),
			r("update", "apps extensions", "replicasets/status"),
			r("update", "apps extensions", "replicasets/finalizers"),
			r("create delete list patch watch", "core", "pods"),
			eventsRule(),
		}},
		{name: "replication-controller", rules: []rule{
			r("get list update watch", "core", "replicationcontrollers"),
			r("update", "core", "replicationcontrollers/status"),
			r("update", "core", "replicationcontrollers/finalizers"),
			r("create delete list patch watch", "core", "pods"),
			eventsRule(),
		}},
		{name: "resourcequota-controller", rules: []rule{
			r("list watch", "*", "*"),
			r("update", "core", "resourcequotas/status"),
			eventsRule(),
		}},
		{name: "root-ca-cert-publisher", rules: []rule{
			r("create update", "core", "configmaps"),
			eventsRule(),
		}},
		{name: "route-controller", rules: []rule{
			r("list watch", "core", "nodes"),
			r("patch", "core", "nodes/status"),
			eventsRule(),
		}},
		{name: "service-account-controller", rules: []rule{
			r("create", "core", "serviceaccounts"),
			eventsRule(),
		}},
		{name: "service-controller", rules: []rule{
			r("read", "core", "services"),
			r("patch update", "core", "services/status"),
			r("list watch", "core", "nodes"),
			eventsRule(),
		}},
		{name: "statefulset-controller", rules: []rule{
			r("list watch", "core", "pods"),
			r("read", "apps", "statefulsets"),
			r("update", "apps", "statefulsets/status"),
			r("update", "apps", "statefulsets/finalizers"),
			r("create delete get patch update", "core", "pods"),
			r("create delete get list patch update watch", "apps", "controllerrevisions"),
			r("create read", "core", "persistentvolumeclaims"),
			eventsRule(),
			r("delete update", "core", "persistentvolumeclaims"),
			r("update", "core", "pods/finalizers"),
		}},
		{name: "ttl-after-finished-controller", rules: []rule{
			r("delete read", "batch", "jobs"),
			eventsRule(),
		}},
		{name: "ttl-controller", rules: []rule{
			r("list patch update watch", "core", "nodes"),
			eventsRule(),
		}},
		{name: "validatingadmissionpolicy-status-controller", rules: []rule{
			r("read", "admissionregistration.k8s.io", "validatingadmissionpolicies"),
			r("get patch update", "admissionregistration.k8s.io", "validatingadmissionpolicies/status"),
			eventsRule(),
		}},
	}
}

// namespaceRoleDefs are upstream's Roles in kube-system and kube-public.
func namespaceRoleDefs() []roleDef {
	return []roleDef{
		{namespace: "kube-public", name: "system:controller:bootstrap-signer", rules: []rule{
			r("read", "core", "configmaps"),
			r("update", "core", "configmaps").named("cluster-info"),
			eventsRule(),
		}},
		{namespace: "kube-system", name: "extension-apiserver-authentication-reader", rules: []rule{
			r("read", "core", "configmaps").named("extension-apiserver-authentication"),
		}},
		{namespace: "kube-system", name: "system::leader-locking-kube-controller-manager", rules: []rule{
			r("watch", "core", "configmaps"),
			r("get update", "core", "configmaps").named("kube-controller-manager"),
			r("create get list update watch", "coordination.k8s.io", "leases"),
			r("create get list update watch", "coordination.k8s.io", "leasecandidates"),
		}},
		{namespace: "kube-system", name: "system::leader-locking-kube-scheduler", rules: []rule{
			r("watch", "core", "configmaps"),
			r("get update", "core", "configmaps").named("kube-scheduler"),
			r("create get list update watch", "coordination.k8s.io", "leases"),
			r("create get list update watch", "coordination.k8s.io", "leasecandidates"),
		}},
		{namespace: "kube-system", name: "system:controller:bootstrap-signer", rules: []rule{
			r("read", "core", "secrets"),
		}},
		{namespace: "kube-system", name: "system:controller:cloud-provider", rules: []rule{
			r("create read", "core", "configmaps"),
		}},
		{namespace: "kube-system", name: "system:controller:token-cleaner", rules: []rule{
			r("delete read", "core", "secrets"),
			eventsRule(),
		}},
	}
}

// clusterRoleBindings are upstream's ClusterRoleBindings other than the controllers'.
// system:node binds no one: kubelets are authorized by the Node authorizer.
func clusterRoleBindings() []rbacv1.ClusterRoleBinding {
	return []rbacv1.ClusterRoleBinding{
		clusterRoleBinding("cluster-admin", "cluster-admin", group("system:masters")),
		clusterRoleBinding("system:basic-user", "system:basic-user", group("system:authenticated")),
		clusterRoleBinding("system:discovery", "system:discovery", group("system:authenticated")),
		clusterRoleBinding("system:kube-controller-manager", "system:kube-controller-manager", user("system:kube-controller-manager")),
		clusterRoleBinding("system:kube-dns", "system:kube-dns", serviceAccount("kube-system", "kube-dns")),
		clusterRoleBinding("system:kube-scheduler", "system:kube-scheduler", user("system:kube-scheduler")),
		clusterRoleBinding("system:monitoring", "system:monitoring", group("system:monitoring")),
		clusterRoleBinding("system:node", "system:node"),
		clusterRoleBinding("system:node-proxier", "system:node-proxier", user("system:kube-proxy")),
		clusterRoleBinding("system:public-info-viewer", "system:public-info-viewer",
			group("system:authenticated"), group("system:unauthenticated")),
		clusterRoleBinding("system:service-account-issuer-discovery", "system:service-account-issuer-discovery",
			group("system:serviceaccounts")),
		clusterRoleBinding("system:volume-scheduler", "system:volume-scheduler", user("system:kube-scheduler")),
	}
}

// namespaceRoleBindings are upstream's RoleBindings in kube-system and kube-public.
func namespaceRoleBindings() []rbacv1.RoleBinding {
	return []rbacv1.RoleBinding{
		roleBinding("kube-public", "system:controller:bootstrap-signer", "system:controller:bootstrap-signer",
			serviceAccount("kube-system", "bootstrap-signer")),
		roleBinding("kube-system", "system::extension-apiserver-authentication-reader", "extension-apiserver-authentication-reader",
			user("system:kube-controller-manager"), user("system:kube-scheduler")),
		roleBinding("kube-system", "system::leader-locking-kube-controller-manager", "system::leader-locking-kube-controller-manager",
			user("system:kube-controller-manager"), serviceAccount("kube-system", "kube-controller-manager"),
			serviceAccount("kube-system", "leader-election-controller")),
		roleBinding("kube-system", "system::leader-locking-kube-scheduler", "system::leader-locking-kube-scheduler",
			user("system:kube-scheduler"), serviceAccount("kube-system", "kube-scheduler")),
		roleBinding("kube-system", "system:controller:bootstrap-signer", "system:controller:bootstrap-signer",
			serviceAccount("kube-system", "bootstrap-signer")),
		roleBinding("kube-system", "system:controller:cloud-provider", "system:controller:cloud-provider",
			serviceAccount("kube-system", "cloud-provider")),
		roleBinding("kube-system", "system:controller:token-cleaner", "system:controller:token-cleaner",
			serviceAccount("kube-system", "token-cleaner")),
	}
}
