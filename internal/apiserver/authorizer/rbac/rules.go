package rbac

import (
	"fmt"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

// RuleAllows reports whether rule matches a request, as upstream: the verb ("*" for
// all), and for a resource request the API group, the resource (with its subresource:
// "pods/log", or "*/log" for every resource's log; "*" matches everything) and the name
// (a rule with resourceNames matches only those names, so never a list or create
// without a name); for other paths the path itself, or a prefix ending in "*".
func RuleAllows(a authorizer.Attributes, rule *rbacv1.PolicyRule) bool {
	if !has(rule.Verbs, a.Verb) {
		return false
	}
	if !a.ResourceRequest {
		for _, u := range rule.NonResourceURLs {
			if urlCovers(u, a.Path) {
				return true
			}
		}
		return false
	}
	if !has(rule.APIGroups, a.APIGroup) {
		return false
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	matched := false
	for _, r := range rule.Resources {
		if r == rbacv1.ResourceAll || r == resource || (a.Subresource != "" && r == "*/"+a.Subresource) {
			matched = true
			break
		}
	}
	if !matched {
		return false
	}
	if len(rule.ResourceNames) == 0 {
		return true
	}
	for _, n := range rule.ResourceNames {
		if n == a.Name {
			return true
		}
	}
	return false
}

// has reports whether set holds v or the wildcard "*".
func has(set []string, v string) bool {
	for _, s := range set {
		if s == v || s == "*" {
			return true
		}
	}
	return false
}

// urlCovers reports whether a rule's non-resource URL (exact, or a prefix ending in "*")
// covers path.
func urlCovers(rule, path string) bool {
	if rule == "*" || rule == path {
		return true
	}
	return strings.HasSuffix(rule, "*") && strings.HasPrefix(path, strings.TrimRight(rule, "*"))
}

// Breakdown splits a rule into rules of one API group, resource, verb and resource name
// each (or one non-resource URL and verb), as upstream's BreakdownRule.
func Breakdown(rule rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, g := range rule.APIGroups {
		for _, r := range rule.Resources {
			for _, v := range rule.Verbs {
				if len(rule.ResourceNames) == 0 {
					out = append(out, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{r}, Verbs: []string{v}})
					continue
				}
				for _, n := range rule.ResourceNames {
					out = append(out, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{r}, Verbs: []string{v}, ResourceNames: []string{n}})
				}
			}
		}
	}
	for _, u := range rule.NonResourceURLs {
		for _, v := range rule.Verbs {
			out = append(out, rbacv1.PolicyRule{NonResourceURLs: []string{u}, Verbs: []string{v}})
		}
	}
	return out
}

// Covers reports whether owner's rules grant everything servant's do, and which parts
// (broken down to single verbs, resources and names) they do not.
func Covers(owner, servant []rbacv1.PolicyRule) (bool, []rbacv1.PolicyRule) {
	var missing []rbacv1.PolicyRule
	for _, s := range servant {
		for _, sub := range Breakdown(s) {
			covered := false
			for i := range owner {
				if ruleCovers(&owner[i], &sub) {
					covered = true
					break
				}
			}
			if !covered {
				missing = append(missing, sub)
			}
		}
	}
	return len(missing) == 0, missing
}

// ruleCovers reports whether owner grants sub, a rule of one verb, resource and name.
// Wildcards in sub are covered only by wildcards: "*" is not "every resource I hold".
func ruleCovers(owner, sub *rbacv1.PolicyRule) bool {
	if !wildOrAll(owner.Verbs, sub.Verbs) || !wildOrAll(owner.APIGroups, sub.APIGroups) {
		return false
	}
	for _, r := range sub.Resources {
		if contains(owner.Resources, "*") || contains(owner.Resources, r) {
			continue
		}
		_, subres, ok := strings.Cut(r, "/")
		if !ok || !contains(owner.Resources, "*/"+subres) {
			return false
		}
	}
	for _, u := range sub.NonResourceURLs {
		covered := false
		for _, o := range owner.NonResourceURLs {
			if o == u || (strings.HasSuffix(o, "*") && strings.HasPrefix(u, strings.TrimRight(o, "*"))) {
				covered = true
				break
			}
		}
		if !covered {
			return false
		}
	}
	if len(owner.ResourceNames) == 0 {
		return true
	}
	return len(sub.ResourceNames) > 0 && allIn(owner.ResourceNames, sub.ResourceNames)
}

func contains(set []string, v string) bool {
	for _, s := range set {
		if s == v {
			return true
		}
	}
	return false
}

func allIn(set, vs []string) bool {
	for _, v := range vs {
		if !contains(set, v) {
			return false
		}
	}
	return true
}

func wildOrAll(set, vs []string) bool { return contains(set, "*") || allIn(set, vs) }

// Compact merges broken-down rules that differ only in their verb (one group, one
// resource, at most one name), as upstream's CompactRules, for readable messages.
func Compact(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type key struct{ group, resource, name string }
	var out []rbacv1.PolicyRule
	merged := map[key]int{}
	for _, r := range rules {
		simple := len(r.APIGroups) == 1 && len(r.Resources) == 1 && len(r.ResourceNames) <= 1 && len(r.NonResourceURLs) == 0
		if !simple {
			out = append(out, r)
			continue
		}
		k := key{group: r.APIGroups[0], resource: r.Resources[0]}
		if len(r.ResourceNames) == 1 {
			k.name = "\x00" + r.ResourceNames[0]
		}
		if i, ok := merged[k]; ok {
			out[i].Verbs = append(out[i].Verbs, r.Verbs...)
			continue
		}
		merged[k] = len(out)
		out = append(out, *r.DeepCopy())
	}
	return out
}

// CompactString is upstream's short form of a rule in escalation messages:
// {APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}.
func CompactString(r rbacv1.PolicyRule) string {
	var parts []string
	if len(r.APIGroups) > 0 {
		parts = append(parts, fmt.Sprintf("APIGroups:%q", r.APIGroups))
	}
	if len(r.Resources) > 0 {
		parts = append(parts, fmt.Sprintf("Resources:%q", r.Resources))
	}
	if len(r.NonResourceURLs) > 0 {
		parts = append(parts, fmt.Sprintf("NonResourceURLs:%q", r.NonResourceURLs))
	}
	if len(r.ResourceNames) > 0 {
		parts = append(parts, fmt.Sprintf("ResourceNames:%q", r.ResourceNames))
	}
	if len(r.Verbs) > 0 {
		parts = append(parts, fmt.Sprintf("Verbs:%q", r.Verbs))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// EscalationError says which of the rules a user tries to grant they do not hold, in
// upstream's words.
func EscalationError(u *filters.User, missing []rbacv1.PolicyRule, resolveErr error) error {
	seen := map[string]bool{}
	var lines []string
	for _, r := range Compact(missing) {
		if s := CompactString(r); !seen[s] {
			seen[s] = true
			lines = append(lines, s)
		}
	}
	sort.Strings(lines)
	groups := u.Groups
	if groups == nil {
		groups = []string{}
	}
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.Name, groups, strings.Join(lines, "\n"))
	if resolveErr != nil {
		msg += fmt.Sprintf("; resolution errors: [%v]", resolveErr)
	}
	return fmt.Errorf("%s", msg)
}
