package audit

import (
	"errors"
	"fmt"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
)

// Policy says what is logged of which request, with the shape of upstream's
// audit.k8s.io/v1 Policy: the first rule that matches a request decides its level;
// a request no rule matches is not logged.
type Policy struct {
	metav1.TypeMeta `json:",inline"`
	// ObjectMeta is accepted and ignored.
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Rules are tried in order.
	Rules []PolicyRule `json:"rules"`
	// OmitStages are stages no event is written at, for every rule.
	OmitStages []Stage `json:"omitStages,omitempty"`
	// OmitManagedFields drops metadata.managedFields from logged bodies, unless a rule says
	// otherwise.
	OmitManagedFields bool `json:"omitManagedFields,omitempty"`
}

// PolicyRule matches requests by user, group, verb, resource, namespace or path; empty
// lists match everything.
type PolicyRule struct {
	// Level is the level of the requests the rule matches.
	Level Level `json:"level"`
	// Users are user names (the authenticated user, not an impersonated one).
	Users []string `json:"users,omitempty"`
	// UserGroups match when the user is in one of them.
	UserGroups []string `json:"userGroups,omitempty"`
	// Verbs are request verbs (get, list, watch, create, ...).
	Verbs []string `json:"verbs,omitempty"`
	// Resources match resource requests; with them or Namespaces, the rule matches no
	// non-resource request.
	Resources []GroupResources `json:"resources,omitempty"`
	// Namespaces match namespaced resource requests ("" for cluster-scoped ones).
	Namespaces []string `json:"namespaces,omitempty"`
	// NonResourceURLs are paths of non-resource requests; a trailing * matches any rest.
	NonResourceURLs []string `json:"nonResourceURLs,omitempty"`
	// OmitStages are stages no event is written at for the matched requests, besides the
	// policy's.
	OmitStages []Stage `json:"omitStages,omitempty"`
	// OmitManagedFields, when set, overrides the policy's.
	OmitManagedFields *bool `json:"omitManagedFields,omitempty"`
}

// GroupResources match resources of one API group.
type GroupResources struct {
	// Group is the API group ("" is the core group).
	Group string `json:"group,omitempty"`
	// Resources are resource names, "resource/subresource", "*", "*/subresource" or
	// "resource/*"; empty is every resource of the group.
	Resources []string `json:"resources,omitempty"`
	// ResourceNames limit the rule to objects of these names.
	ResourceNames []string `json:"resourceNames,omitempty"`
}

// RequestConfig is what a policy decides for one request.
type RequestConfig struct {
	Level             Level
	OmitStages        []Stage
	OmitManagedFields bool
}

// omits reports whether no event is written at s.
func (c RequestConfig) omits(s Stage) bool {
	for _, o := range c.OmitStages {
		if o == s {
			return true
		}
	}
	return false
}

// LoadPolicyFile reads and checks a policy file (YAML or JSON). warnings list fields the
// decoder did not know, which are ignored, as upstream's lenient fallback.
func LoadPolicyFile(path string) (p *Policy, warnings []string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read audit policy: %w", err)
	}
	p, warnings, err = ParsePolicy(data)
	if err != nil {
		return nil, nil, fmt.Errorf("audit policy %s: %w", path, err)
	}
	return p, warnings, nil
}

// ParsePolicy decodes and checks a policy, as upstream's: apiVersion audit.k8s.io/v1,
// kind Policy, at least one rule, known levels and stages, non-resource URLs that begin
// with / and have * only at the end and are not mixed with resources or namespaces,
// groups that are DNS subdomains, resourceNames only with resources.
func ParsePolicy(data []byte) (*Policy, []string, error) {
	var p Policy
	var warnings []string
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		p = Policy{}
		if lerr := yaml.Unmarshal(data, &p); lerr != nil {
			return nil, nil, fmt.Errorf("decode: %w", lerr)
		}
		warnings = append(warnings, err.Error())
	}
	if p.APIVersion != APIVersion {
		if p.APIVersion == "" {
			return nil, nil, errors.New("apiVersion is missing (want audit.k8s.io/v1)")
		}
		return nil, nil, fmt.Errorf("unknown group version %q (want audit.k8s.io/v1)", p.APIVersion)
	}
	if p.Kind != KindPolicy {
		return nil, nil, fmt.Errorf("kind %q is not Policy", p.Kind)
	}
	if err := p.validate(); err != nil {
		return nil, nil, err
	}
	if len(p.Rules) == 0 {
		return nil, nil, errors.New("the policy has no rules")
	}
	return &p, warnings, nil
}

func (p *Policy) validate() error {
	var errs []error
	errs = append(errs, validateStages(p.OmitStages, "omitStages")...)
	for i, r := range p.Rules {
		at := fmt.Sprintf("rules[%d]", i)
		switch {
		case r.Level == "":
			errs = append(errs, fmt.Errorf("%s.level: Required value", at))
		case !r.Level.valid():
			errs = append(errs, fmt.Errorf("%s.level: Unsupported value: %q: supported values: %q, %q, %q, %q", at, r.Level,
				LevelNone, LevelMetadata, LevelRequest, LevelRequestResponse))
		}
		for j, u := range r.NonResourceURLs {
			if u == "*" {
				continue
			}
			if !strings.HasPrefix(u, "/") {
				errs = append(errs, fmt.Errorf("%s.nonResourceURLs[%d]: Invalid value: %q: non-resource URL rules must begin with a '/' character", at, j, u))
			}
			if u != "" && strings.Contains(u[:len(u)-1], "*") {
				errs = append(errs, fmt.Errorf("%s.nonResourceURLs[%d]: Invalid value: %q: non-resource URL wildcards '*' must be the final character of the rule", at, j, u))
			}
		}
		for _, gr := range r.Resources {
			if gr.Group != "" {
				if msgs := validation.IsDNS1123Subdomain(gr.Group); len(msgs) > 0 {
					errs = append(errs, fmt.Errorf("%s.resources.group: Invalid value: %q: %s", at, gr.Group, strings.Join(msgs, ",")))
				}
			}
			if len(gr.ResourceNames) > 0 && len(gr.Resources) == 0 {
				errs = append(errs, fmt.Errorf("%s.resources.resourceNames: Invalid value: %q: using resourceNames requires at least one resource", at, gr.ResourceNames))
			}
		}
		errs = append(errs, validateStages(r.OmitStages, at+".omitStages")...)
		if len(r.NonResourceURLs) > 0 && (len(r.Resources) > 0 || len(r.Namespaces) > 0) {
			errs = append(errs, fmt.Errorf("%s.nonResourceURLs: Invalid value: %q: rules cannot apply to both regular resources and non-resource URLs", at, r.NonResourceURLs))
		}
	}
	return errors.Join(errs...)
}

func validateStages(stages []Stage, at string) []error {
	var errs []error
	for i, s := range stages {
		if !s.valid() {
			errs = append(errs, fmt.Errorf("%s[%d]: Invalid value: %q: allowed stages are %s,%s,%s,%s", at, i, s,
				StageRequestReceived, StageResponseStarted, StageResponseComplete, StagePanic))
		}
	}
	return errs
}

// Evaluate returns the level, omitted stages and managed-fields choice for a request:
// those of the first matching rule (its stages joined with the policy's), else None.
func (p *Policy) Evaluate(a authorizer.Attributes) RequestConfig {
	for i := range p.Rules {
		r := &p.Rules[i]
		if r.matches(a) {
			c := RequestConfig{Level: r.Level, OmitStages: p.OmitStages, OmitManagedFields: p.OmitManagedFields}
			if len(r.OmitStages) > 0 {
				c.OmitStages = append(append([]Stage{}, p.OmitStages...), r.OmitStages...)
			}
			if r.OmitManagedFields != nil {
				c.OmitManagedFields = *r.OmitManagedFields
			}
			return c
		}
	}
	return RequestConfig{Level: LevelNone, OmitStages: p.OmitStages, OmitManagedFields: p.OmitManagedFields}
}

func (r *PolicyRule) matches(a authorizer.Attributes) bool {
	if len(r.Users) > 0 && (a.User == nil || !contains(r.Users, a.User.Name)) {
		return false
	}
	if len(r.UserGroups) > 0 {
		if a.User == nil || !containsAny(r.UserGroups, a.User.Groups) {
			return false
		}
	}
	if len(r.Verbs) > 0 && !contains(r.Verbs, a.Verb) {
		return false
	}
	if len(r.Namespaces) > 0 || len(r.Resources) > 0 {
		return r.matchesResource(a)
	}
	if len(r.NonResourceURLs) > 0 {
		if a.ResourceRequest {
			return false
		}
		for _, u := range r.NonResourceURLs {
			if u == "*" || u == a.Path || (strings.HasSuffix(u, "*") && strings.HasPrefix(a.Path, strings.TrimSuffix(u, "*"))) {
				return true
			}
		}
		return false
	}
	return true
}

func (r *PolicyRule) matchesResource(a authorizer.Attributes) bool {
	if !a.ResourceRequest {
		return false
	}
	if len(r.Namespaces) > 0 && !contains(r.Namespaces, a.Namespace) {
		return false
	}
	if len(r.Resources) == 0 {
		return true
	}
	combined := a.Resource
	if a.Subresource != "" {
		combined += "/" + a.Subresource
	}
	for _, gr := range r.Resources {
		if gr.Group != a.APIGroup {
			continue
		}
		if len(gr.Resources) == 0 {
			return true
		}
		if len(gr.ResourceNames) > 0 && !contains(gr.ResourceNames, a.Name) {
			continue
		}
		for _, res := range gr.Resources {
			switch {
			case res == "*" || res == combined:
				return true
			case a.Subresource != "" && strings.HasPrefix(res, "*/") && res[2:] == a.Subresource:
				return true
			case strings.HasSuffix(res, "/*") && res[:len(res)-2] == a.Resource:
				return true
			}
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func containsAny(list, of []string) bool {
	for _, s := range of {
		if contains(list, s) {
			return true
		}
	}
	return false
}
