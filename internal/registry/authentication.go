package registry

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// authenticationResources are the authentication.k8s.io kinds besides SelfSubjectReview:
// TokenReview, computed per request by an action (package serviceaccount).
func authenticationResources() []*Resource {
	return []*Resource{
		{
			GroupVersion: authenticationV1, Kind: "TokenReview", Plural: "tokenreviews", Singular: "tokenreview",
			Verbs: []string{"create"}, Virtual: true,
			New: func() runtime.Object { return &authenticationv1.TokenReview{} },
		},
	}
}
