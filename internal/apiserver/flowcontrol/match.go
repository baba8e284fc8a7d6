package flowcontrol

import (
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

const serviceAccountPrefix = "system:serviceaccount:"

// matches reports whether a FlowSchema's rule set matches the request: some rule whose
// subjects include the user and whose resource (or non-resource) rules cover it.
func matches(fs *flowcontrolv1.FlowSchema, a *authorizer.Attributes) bool {
	for i := range fs.Spec.Rules {
		r := &fs.Spec.Rules[i]
		if !subjectsMatch(r.Subjects, a.User) {
			continue
		}
		if a.ResourceRequest {
			for j := range r.ResourceRules {
				if resourceRuleMatches(&r.ResourceRules[j], a) {
					return true
				}
			}
			continue
		}
		for j := range r.NonResourceRules {
			if nonResourceRuleMatches(&r.NonResourceRules[j], a) {
				return true
			}
		}
	}
	return false
}

func subjectsMatch(subjects []flowcontrolv1.Subject, u *filters.User) bool {
	if u == nil {
		u = &filters.User{Name: filters.Anonymous, Groups: []string{"system:unauthenticated"}}
	}
	for i := range subjects {
		s := &subjects[i]
		switch s.Kind {
		case flowcontrolv1.SubjectKindUser:
			if s.User != nil && (s.User.Name == flowcontrolv1.NameAll || s.User.Name == u.Name) {
				return true
			}
		case flowcontrolv1.SubjectKindGroup:
			if s.Group == nil {
				continue
			}
			if s.Group.Name == flowcontrolv1.NameAll {
				return true
			}
			for _, g := range u.Groups {
				if g == s.Group.Name {
					return true
				}
			}
		case flowcontrolv1.SubjectKindServiceAccount:
			if s.ServiceAccount == nil || !strings.HasPrefix(u.Name, serviceAccountPrefix) {
				continue
			}
			ns, name, ok := strings.Cut(u.Name[len(serviceAccountPrefix):], ":")
			if ok && ns == s.ServiceAccount.Namespace && (s.ServiceAccount.Name == flowcontrolv1.NameAll || s.ServiceAccount.Name == name) {
				return true
			}
		}
	}
	return false
}

func member(list []string, v string) bool {
	for _, x := range list {
		if x == "*" || x == v {
			return true
		}
	}
	return false
}

func resourceRuleMatches(r *flowcontrolv1.ResourcePolicyRule, a *authorizer.Attributes) bool {
	if !member(r.Verbs, a.Verb) || !member(r.APIGroups, a.APIGroup) {
		return false
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	if !member(r.Resources, resource) {
		return false
	}
	if a.Namespace == "" {
		return r.ClusterScope
	}
	return member(r.Namespaces, a.Namespace)
}

func nonResourceRuleMatches(r *flowcontrolv1.NonResourcePolicyRule, a *authorizer.Attributes) bool {
	if !member(r.Verbs, a.Verb) {
		return false
	}
	for _, u := range r.NonResourceURLs {
		if u == "*" || u == a.Path {
			return true
		}
		// As upstream, a rule's path also covers the paths below it ("/healthz" covers
		// "/healthz/etcd"), with or without a trailing "/*".
		prefix := strings.TrimSuffix(u, "*")
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		if strings.HasPrefix(a.Path, prefix) {
			return true
		}
	}
	return false
}

// distinguisher is the part of a flow's identity that comes from the request.
func distinguisher(fs *flowcontrolv1.FlowSchema, a *authorizer.Attributes) string {
	if fs.Spec.DistinguisherMethod == nil {
		return ""
	}
	switch fs.Spec.DistinguisherMethod.Type {
	case flowcontrolv1.FlowDistinguisherMethodByUserType:
		if a.User != nil {
			return a.User.Name
		}
	case flowcontrolv1.FlowDistinguisherMethodByNamespaceType:
		return a.Namespace
	}
	return ""
}
