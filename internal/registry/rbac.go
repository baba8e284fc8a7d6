package registry

import (
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/registry/validation"
)

var (
	rbacV1          = rbacv1.SchemeGroupVersion
	authorizationV1 = schema.GroupVersion{Group: "authorization.k8s.io", Version: "v1"}
)

// rbacResources are rbac.authorization.k8s.io/v1's four kinds, as upstream's: no short
// names, a PUT may create (AllowCreateOnUpdate), and a binding's roleRef is immutable.
func rbacResources() []*Resource {
	return []*Resource{
		{
			GroupVersion: rbacV1, Kind: "ClusterRoleBinding", ListKind: "ClusterRoleBindingList", Plural: "clusterrolebindings", Singular: "clusterrolebinding",
			StoragePrefix: "/registry/clusterrolebindings", AllowCreateOnUpdate: true,
			Strategy: Strategy{Default: defaultRBAC,
				Validate: func(obj runtime.Object) field.ErrorList {
					return validation.ValidateClusterRoleBinding(obj.(*rbacv1.ClusterRoleBinding))
				},
				ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validation.ValidateClusterRoleBindingUpdate(obj.(*rbacv1.ClusterRoleBinding), old.(*rbacv1.ClusterRoleBinding))
				}},
			New: func() runtime.Object { return &rbacv1.ClusterRoleBinding{} }, NewList: func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
		},
		{
			GroupVersion: rbacV1, Kind: "ClusterRole", ListKind: "ClusterRoleList", Plural: "clusterroles", Singular: "clusterrole",
			StoragePrefix: "/registry/clusterroles", AllowCreateOnUpdate: true,
			Strategy: Strategy{Default: defaultRBAC,
				Validate: func(obj runtime.Object) field.ErrorList {
					return validation.ValidateClusterRole(obj.(*rbacv1.ClusterRole))
				},
				ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validation.ValidateClusterRoleUpdate(obj.(*rbacv1.ClusterRole), old.(*rbacv1.ClusterRole))
				}},
			New: func() runtime.Object { return &rbacv1.ClusterRole{} }, NewList: func() runtime.Object { return &rbacv1.ClusterRoleList{} },
		},
		{
			GroupVersion: rbacV1, Kind: "RoleBinding", ListKind: "RoleBindingList", Plural: "rolebindings", Singular: "rolebinding", Namespaced: true,
			StoragePrefix: "/registry/rolebindings", AllowCreateOnUpdate: true,
			Strategy: Strategy{Default: defaultRBAC,
				Validate: func(obj runtime.Object) field.ErrorList {
					return validation.ValidateRoleBinding(obj.(*rbacv1.RoleBinding))
				},
				ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validation.ValidateRoleBindingUpdate(obj.(*rbacv1.RoleBinding), old.(*rbacv1.RoleBinding))
				}},
			New: func() runtime.Object { return &rbacv1.RoleBinding{} }, NewList: func() runtime.Object { return &rbacv1.RoleBindingList{} },
		},
		{
			GroupVersion: rbacV1, Kind: "Role", ListKind: "RoleList", Plural: "roles", Singular: "role", Namespaced: true,
			StoragePrefix: "/registry/roles", AllowCreateOnUpdate: true,
			Strategy: Strategy{Default: defaultRBAC,
				Validate: func(obj runtime.Object) field.ErrorList {
					return validation.ValidateRole(obj.(*rbacv1.Role))
				},
				ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validation.ValidateRoleUpdate(obj.(*rbacv1.Role), old.(*rbacv1.Role))
				}},
			New: func() runtime.Object { return &rbacv1.Role{} }, NewList: func() runtime.Object { return &rbacv1.RoleList{} },
		},
	}
}

// authorizationResources are authorization.k8s.io/v1's reviews: computed per request by
// the API server's authorizer, never stored.
func authorizationResources() []*Resource {
	return []*Resource{
		{
			GroupVersion: authorizationV1, Kind: "LocalSubjectAccessReview", Plural: "localsubjectaccessreviews", Singular: "localsubjectaccessreview",
			Namespaced: true, Verbs: []string{"create"}, Virtual: true,
			New: func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} },
		},
		{
			GroupVersion: authorizationV1, Kind: "SelfSubjectAccessReview", Plural: "selfsubjectaccessreviews", Singular: "selfsubjectaccessreview",
			Verbs: []string{"create"}, Virtual: true,
			New: func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} },
		},
		{
			GroupVersion: authorizationV1, Kind: "SelfSubjectRulesReview", Plural: "selfsubjectrulesreviews", Singular: "selfsubjectrulesreview",
			Verbs: []string{"create"}, Virtual: true,
			New: func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} },
		},
		{
			GroupVersion: authorizationV1, Kind: "SubjectAccessReview", Plural: "subjectaccessreviews", Singular: "subjectaccessreview",
			Verbs: []string{"create"}, Virtual: true,
			New: func() runtime.Object { return &authorizationv1.SubjectAccessReview{} },
		},
	}
}

// defaultRBAC applies upstream's defaults of rbac/v1: a binding's roleRef.apiGroup is
// the RBAC group, and a User or Group subject's apiGroup too.
func defaultRBAC(obj runtime.Object) {
	var subjects []rbacv1.Subject
	switch o := obj.(type) {
	case *rbacv1.RoleBinding:
		if o.RoleRef.APIGroup == "" {
			o.RoleRef.APIGroup = rbacv1.GroupName
		}
		subjects = o.Subjects
	case *rbacv1.ClusterRoleBinding:
		if o.RoleRef.APIGroup == "" {
			o.RoleRef.APIGroup = rbacv1.GroupName
		}
		subjects = o.Subjects
	}
	for i := range subjects {
		if s := &subjects[i]; s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}
