package validatingadmissionpolicy

import (
	"context"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

var namespacesResource = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// matches reports whether the request a matches m (a policy's matchConstraints or a
// binding's matchResources), as upstream's matcher: the namespace selector, the
// object selector, then no exclude rule and some resource rule (an empty rule list
// matches every resource). Selector errors count only for a request the rules match.
func (p *Plugin) matches(ctx context.Context, a *admission.Attributes, m *admissionregistrationv1.MatchResources) (bool, error) {
	nsOK, nsErr := p.matchNamespace(ctx, a, m.NamespaceSelector)
	if !nsOK && nsErr == nil {
		return false, nil
	}
	objOK, objErr := matchObject(a, m.ObjectSelector)
	if !objOK && objErr == nil {
		return false, nil
	}
	if ruleMatch(m.ExcludeResourceRules, a) {
		return false, nil
	}
	if len(m.ResourceRules) > 0 && !ruleMatch(m.ResourceRules, a) {
		return false, nil
	}
	if nsErr != nil {
		return false, nsErr
	}
	return true, objErr
}

// matchNamespace matches the labels of the request's namespace (of the Namespace
// itself when one is written); cluster-scoped objects always match.
func (p *Plugin) matchNamespace(ctx context.Context, a *admission.Attributes, sel *metav1.LabelSelector) (bool, error) {
	isNamespace := a.Resource.GroupResource() == namespacesResource.GroupResource()
	if a.Namespace == "" && !isNamespace {
		return true, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	if s.Empty() {
		return true, nil
	}
	if isNamespace && a.Subresource == "" && (a.Operation == admission.Create || a.Operation == admission.Update) {
		m, err := meta.Accessor(a.Object)
		if err != nil {
			return false, apierrors.NewInternalError(err)
		}
		return s.Matches(labels.Set(m.GetLabels())), nil
	}
	name := a.Namespace
	if isNamespace && name == "" {
		name = a.Name
	}
	ns, err := p.namespace(ctx, name)
	if err != nil {
		return false, err
	}
	return s.Matches(labels.Set(ns.Labels)), nil
}

// matchObject matches the labels of the object or of the stored one.
func matchObject(a *admission.Attributes, sel *metav1.LabelSelector) (bool, error) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	if s.Empty() {
		return true, nil
	}
	for _, o := range []runtime.Object{a.Object, a.OldObject} {
		if o == nil {
			continue
		}
		if m, err := meta.Accessor(o); err == nil && s.Matches(labels.Set(m.GetLabels())) {
			return true, nil
		}
	}
	return false, nil
}

// ruleMatch reports whether a rule matches the request: scope, operation, group,
// version, resource/subresource (with wildcards) and resourceNames.
func ruleMatch(rules []admissionregistrationv1.NamedRuleWithOperations, a *admission.Attributes) bool {
	for _, r := range rules {
		if !scopeMatch(r.Scope, a) || !opMatch(r.Operations, a.Operation) ||
			!anyOf(r.APIGroups, a.Resource.Group) || !anyOf(r.APIVersions, a.Resource.Version) || !resourceMatch(r.Resources, a) {
			continue
		}
		if len(r.ResourceNames) == 0 {
			return true
		}
		for _, n := range r.ResourceNames {
			if n == a.Name {
				return true
			}
		}
	}
	return false
}

func scopeMatch(scope *admissionregistrationv1.ScopeType, a *admission.Attributes) bool {
	if scope == nil || *scope == admissionregistrationv1.AllScopes {
		return true
	}
	isNamespace := a.Resource == namespacesResource
	switch *scope {
	case admissionregistrationv1.NamespacedScope:
		return !isNamespace && a.Namespace != ""
	case admissionregistrationv1.ClusterScope:
		return isNamespace || a.Namespace == ""
	}
	return false
}

func opMatch(ops []admissionregistrationv1.OperationType, op admission.Operation) bool {
	for _, o := range ops {
		if o == admissionregistrationv1.OperationAll || string(o) == string(op) {
			return true
		}
	}
	return false
}

func anyOf(list []string, s string) bool {
	for _, x := range list {
		if x == "*" || x == s {
			return true
		}
	}
	return false
}

func resourceMatch(resources []string, a *admission.Attributes) bool {
	for _, rs := range resources {
		res, sub, _ := strings.Cut(rs, "/")
		if (res == "*" || res == a.Resource.Resource) && (sub == "*" || sub == a.Subresource) {
			return true
		}
	}
	return false
}

// namespace reads a namespace (NotFound as the API's error).
func (p *Plugin) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	obj, err := p.reader.Get(ctx, schema.GroupResource{Resource: "namespaces"}, "", name)
	if err != nil {
		return nil, err
	}
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return nil, apierrors.NewInternalError(errNotNamespace)
	}
	return ns, nil
}
