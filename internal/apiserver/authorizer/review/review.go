// Package review serves authorization.k8s.io/v1's reviews as API server actions:
// SubjectAccessReview (may this user do this?), LocalSubjectAccessReview (the same in
// one namespace), SelfSubjectAccessReview (may I?, `kubectl auth can-i`) and
// SelfSubjectRulesReview (what may I do here?, `kubectl auth can-i --list`). They are
// answered by the server's whole authorizer, the one requests go through.
package review

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/apiserver"
	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

// Group is the reviews' API group.
const Group = "authorization.k8s.io"

// RulesFunc returns the rules a user holds in a namespace; incomplete says some
// authorizer could not list its rules, err what went wrong resolving them.
type RulesFunc func(ctx context.Context, u *filters.User, namespace string) (rules []rbacv1.PolicyRule, incomplete bool, err error)

// Reviews answers the reviews.
type Reviews struct {
	// Authorizer returns the server's authorizer (it is built after the actions).
	Authorizer func() authorizer.Authorizer
	// Rules lists a user's rules for SelfSubjectRulesReview.
	Rules RulesFunc
}

// Actions returns the four reviews' actions.
func (r *Reviews) Actions() map[apiserver.ActionKey]apiserver.Action {
	return map[apiserver.ActionKey]apiserver.Action{
		{Group: Group, Resource: "subjectaccessreviews"}:      {Do: r.subjectAccessReview},
		{Group: Group, Resource: "localsubjectaccessreviews"}: {Do: r.localSubjectAccessReview},
		{Group: Group, Resource: "selfsubjectaccessreviews"}:  {Do: r.selfSubjectAccessReview},
		{Group: Group, Resource: "selfsubjectrulesreviews"}:   {Do: r.selfSubjectRulesReview},
	}
}

func invalid(kind string, errs field.ErrorList) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: Group, Kind: kind}, "", errs)
}

func (r *Reviews) subjectAccessReview(ctx context.Context, _, _ string, obj runtime.Object) (runtime.Object, error) {
	sar, ok := obj.(*authorizationv1.SubjectAccessReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a SubjectAccessReview: %T", obj))
	}
	errs := validateSpec(&sar.Spec, field.NewPath("spec"))
	errs = append(errs, emptyMeta(sar.ObjectMeta, false)...)
	if len(errs) > 0 {
		return nil, invalid("SubjectAccessReview", errs)
	}
	sar.Status = r.decide(ctx, specAttributes(&sar.Spec))
	return sar, nil
}

func (r *Reviews) localSubjectAccessReview(ctx context.Context, namespace, _ string, obj runtime.Object) (runtime.Object, error) {
	sar, ok := obj.(*authorizationv1.LocalSubjectAccessReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a LocalSubjectAccessReview: %T", obj))
	}
	// As upstream's create handler: the object takes the request's namespace, or must name it.
	switch {
	case sar.Namespace == "":
		sar.Namespace = namespace
	case sar.Namespace != namespace:
		return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	errs := validateSpec(&sar.Spec, field.NewPath("spec"))
	errs = append(errs, emptyMeta(sar.ObjectMeta, true)...)
	if ra := sar.Spec.ResourceAttributes; ra != nil && ra.Namespace != sar.Namespace {
		errs = append(errs, field.Invalid(field.NewPath("spec.resourceAttributes.namespace"), ra.Namespace, "must match metadata.namespace"))
	}
	if sar.Spec.NonResourceAttributes != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec.nonResourceAttributes"), sar.Spec.NonResourceAttributes, "disallowed on this kind of request"))
	}
	if len(errs) > 0 {
		return nil, invalid("LocalSubjectAccessReview", errs)
	}
	if namespace == "" {
		return nil, apierrors.NewBadRequest("namespace is required on this type: ")
	}
	sar.Status = r.decide(ctx, specAttributes(&sar.Spec))
	return sar, nil
}

func (r *Reviews) selfSubjectAccessReview(ctx context.Context, _, _ string, obj runtime.Object) (runtime.Object, error) {
	sar, ok := obj.(*authorizationv1.SelfSubjectAccessReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a SelfSubjectAccessReview: %T", obj))
	}
	errs := validateAttributes(sar.Spec.ResourceAttributes, sar.Spec.NonResourceAttributes, field.NewPath("spec"))
	errs = append(errs, emptyMeta(sar.ObjectMeta, false)...)
	if len(errs) > 0 {
		return nil, invalid("SelfSubjectAccessReview", errs)
	}
	u, ok := filters.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	sar.Status = r.decide(ctx, attributes(u, sar.Spec.ResourceAttributes, sar.Spec.NonResourceAttributes))
	return sar, nil
}

func (r *Reviews) selfSubjectRulesReview(ctx context.Context, _, _ string, obj runtime.Object) (runtime.Object, error) {
	rr, ok := obj.(*authorizationv1.SelfSubjectRulesReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a SelfSubjectRulesReview: %T", obj))
	}
	u, ok := filters.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	if rr.Spec.Namespace == "" {
		return nil, apierrors.NewBadRequest("no namespace on request")
	}
	out := &authorizationv1.SelfSubjectRulesReview{}
	out.Status.ResourceRules = []authorizationv1.ResourceRule{}
	out.Status.NonResourceRules = []authorizationv1.NonResourceRule{}
	if r.Rules == nil {
		out.Status.Incomplete = true
		return out, nil
	}
	rules, incomplete, err := r.Rules(ctx, u, rr.Spec.Namespace)
	for _, p := range rules {
		if len(p.Resources) > 0 {
			out.Status.ResourceRules = append(out.Status.ResourceRules, authorizationv1.ResourceRule{
				Verbs: p.Verbs, APIGroups: p.APIGroups, Resources: p.Resources, ResourceNames: p.ResourceNames})
		}
		if len(p.NonResourceURLs) > 0 {
			out.Status.NonResourceRules = append(out.Status.NonResourceRules, authorizationv1.NonResourceRule{
				Verbs: p.Verbs, NonResourceURLs: p.NonResourceURLs})
		}
	}
	out.Status.Incomplete = incomplete
	if err != nil {
		out.Status.EvaluationError = err.Error()
	}
	return out, nil
}

// decide asks the server's authorizer.
func (r *Reviews) decide(ctx context.Context, a authorizer.Attributes) authorizationv1.SubjectAccessReviewStatus {
	z := r.Authorizer()
	d, reason, err := z.Authorize(ctx, a)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: d == authorizer.Allow, Denied: d == authorizer.Deny, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st
}

// specAttributes are the attributes of a SubjectAccessReview's spec: the user as given,
// without the groups authentication would add (as upstream).
func specAttributes(spec *authorizationv1.SubjectAccessReviewSpec) authorizer.Attributes {
	u := &filters.User{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
	if len(spec.Extra) > 0 {
		u.Extra = map[string][]string{}
		for k, v := range spec.Extra {
			u.Extra[k] = []string(v)
		}
	}
	return attributes(u, spec.ResourceAttributes, spec.NonResourceAttributes)
}

func attributes(u *filters.User, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) authorizer.Attributes {
	if ra == nil {
		return authorizer.Attributes{User: u, Verb: nra.Verb, Path: nra.Path}
	}
	version := ra.Version
	if version == "" {
		version = "*"
	}
	return authorizer.Attributes{User: u, Verb: ra.Verb, ResourceRequest: true, APIGroup: ra.Group, APIVersion: version,
		Resource: ra.Resource, Subresource: ra.Subresource, Namespace: ra.Namespace, Name: ra.Name}
}

func validateSpec(spec *authorizationv1.SubjectAccessReviewSpec, p *field.Path) field.ErrorList {
	errs := validateAttributes(spec.ResourceAttributes, spec.NonResourceAttributes, p)
	if spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(p.Child("user"), spec.User, "at least one of user or group must be specified"))
	}
	return errs
}

func validateAttributes(ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ra != nil && nra != nil {
		errs = append(errs, field.Invalid(p.Child("nonResourceAttributes"), nra, "cannot be specified in combination with resourceAttributes"))
	}
	if ra == nil && nra == nil {
		errs = append(errs, field.Invalid(p.Child("resourceAttributes"), nra, "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	if ra != nil && ra.FieldSelector != nil {
		fs := ra.FieldSelector
		fp := field.NewPath("spec.resourceAttributes").Child("fieldSelector")
		if fs.RawSelector != "" && len(fs.Requirements) > 0 {
			errs = append(errs, field.Invalid(fp.Child("rawSelector"), fs.RawSelector, "may not specified at the same time as requirements"))
		}
		if fs.RawSelector == "" && len(fs.Requirements) == 0 {
			errs = append(errs, field.Required(fp.Child("requirements"), fmt.Sprintf("when %s is specified, requirements or rawSelector is required", fp)))
		}
	}
	if ra != nil && ra.LabelSelector != nil {
		ls := ra.LabelSelector
		lp := field.NewPath("spec.resourceAttributes").Child("labelSelector")
		if ls.RawSelector != "" && len(ls.Requirements) > 0 {
			errs = append(errs, field.Invalid(lp.Child("rawSelector"), ls.RawSelector, "may not specified at the same time as requirements"))
		}
		if ls.RawSelector == "" && len(ls.Requirements) == 0 {
			errs = append(errs, field.Required(lp.Child("requirements"), fmt.Sprintf("when %s is specified, requirements or rawSelector is required", lp)))
		}
	}
	return errs
}

// emptyMeta checks that a review's metadata is empty (but for its namespace, for a
// LocalSubjectAccessReview), as upstream.
func emptyMeta(m metav1.ObjectMeta, namespaced bool) field.ErrorList {
	c := m
	c.ManagedFields = nil
	msg := "must be empty"
	if namespaced {
		c.Namespace = ""
		msg = "must be empty except for namespace"
	}
	if !apiequality.Semantic.DeepEqual(metav1.ObjectMeta{}, c) {
		return field.ErrorList{field.Invalid(field.NewPath("metadata"), m, msg)}
	}
	return nil
}
