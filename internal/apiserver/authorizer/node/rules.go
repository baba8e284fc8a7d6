package node

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
)

// RulesAllow reports whether one of the rules allows the request, with RBAC's matching
// (wildcards, resource/subresource, "*/subresource", resource names, URL prefixes
// ending in "*").
func RulesAllow(a authorizer.Attributes, rules []rbacv1.PolicyRule) bool {
	for i := range rules {
		if ruleAllows(a, &rules[i]) {
			return true
		}
	}
	return false
}

func ruleAllows(a authorizer.Attributes, r *rbacv1.PolicyRule) bool {
	if !has(r.Verbs, a.Verb) {
		return false
	}
	if !a.ResourceRequest {
		for _, u := range r.NonResourceURLs {
			if u == "*" || u == a.Path || (strings.HasSuffix(u, "*") && strings.HasPrefix(a.Path, strings.TrimSuffix(u, "*"))) {
				return true
			}
		}
		return false
	}
	if !has(r.APIGroups, a.APIGroup) {
		return false
	}
	combined := a.Resource
	if a.Subresource != "" {
		combined += "/" + a.Subresource
	}
	matched := false
	for _, res := range r.Resources {
		if res == rbacv1.ResourceAll || res == combined || (a.Subresource != "" && res == "*/"+a.Subresource) {
			matched = true
			break
		}
	}
	if !matched {
		return false
	}
	return len(r.ResourceNames) == 0 || (a.Name != "" && hasExact(r.ResourceNames, a.Name))
}

func has(list []string, x string) bool {
	for _, v := range list {
		if v == "*" || v == x {
			return true
		}
	}
	return false
}

func hasExact(list []string, x string) bool {
	for _, v := range list {
		if v == x {
			return true
		}
	}
	return false
}
