package audit

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

// docsPolicy follows the example policy of upstream's auditing task page, rule by rule
// (https://kubernetes.io/docs/tasks/debug/debug-cluster/audit/).
const docsPolicy = `
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
# Pods themselves (not their subresources) with bodies both ways.
- level: RequestResponse
  resources:
  - group: ""
    resources: ["pods"]
- level: Metadata
  resources:
  - group: ""
    resources: ["pods/log", "pods/status"]
# Not one configmap.
- level: None
  resources:
  - group: ""
    resources: ["configmaps"]
    resourceNames: ["controller-leader"]
# Not kube-proxy's watches of endpoints and services.
- level: None
  users: ["system:kube-proxy"]
  verbs: ["watch"]
  resources:
  - group: ""
    resources: ["endpoints", "services"]
# Not the discovery and version paths, for users with credentials.
- level: None
  userGroups: ["system:authenticated"]
  nonResourceURLs: ["/api*", "/version"]
# Configmap bodies in kube-system only.
- level: Request
  resources:
  - group: ""
    resources: ["configmaps"]
  namespaces: ["kube-system"]
- level: Metadata
  resources:
  - group: ""
    resources: ["secrets", "configmaps"]
# The rest of the core and extensions groups with request bodies.
- level: Request
  resources:
  - group: ""
  - group: "extensions"
# Everything else, without RequestReceived for long-running requests either.
- level: Metadata
  omitStages: ["RequestReceived"]
`

func attrs(t *testing.T, method, path string, u *filters.User) authorizer.Attributes {
	t.Helper()
	return authorizer.RequestAttributes(httptest.NewRequest(method, path, nil), u)
}

func TestPolicyDocsExample(t *testing.T) {
	p, warnings, err := ParsePolicy([]byte(docsPolicy))
	if err != nil || len(warnings) > 0 {
		t.Fatalf("ParsePolicy: %v %v", err, warnings)
	}
	alice := &filters.User{Name: "alice", Groups: []string{"dev", filters.AllAuthenticated}}
	proxy := &filters.User{Name: "system:kube-proxy", Groups: []string{filters.AllAuthenticated}}
	anon := &filters.User{Name: filters.Anonymous, Groups: []string{filters.AllUnauthenticated}}
	for _, c := range []struct {
		method, path string
		user         *filters.User
		want         Level
	}{
		{"GET", "/api/v1/namespaces/default/pods/p", alice, LevelRequestResponse},
		{"POST", "/api/v1/namespaces/default/pods", alice, LevelRequestResponse},
		{"GET", "/api/v1/pods?watch=true", alice, LevelRequestResponse},
		{"GET", "/api/v1/namespaces/default/pods/p/log", alice, LevelMetadata},
		{"PUT", "/api/v1/namespaces/default/pods/p/status", alice, LevelMetadata},
		// pods does not match pods/exec: the core-group rule does.
		{"POST", "/api/v1/namespaces/default/pods/p/exec", alice, LevelRequest},
		{"PUT", "/api/v1/namespaces/kube-system/configmaps/controller-leader", alice, LevelNone},
		{"PUT", "/api/v1/namespaces/kube-system/configmaps/other", alice, LevelRequest},
		{"PUT", "/api/v1/namespaces/default/configmaps/controller-leader", alice, LevelNone},
		{"GET", "/api/v1/namespaces/default/configmaps/other", alice, LevelMetadata},
		{"GET", "/api/v1/namespaces/default/secrets/s", alice, LevelMetadata},
		{"GET", "/api/v1/endpoints?watch=1", proxy, LevelNone},
		{"GET", "/api/v1/watch/services", proxy, LevelNone},
		{"GET", "/api/v1/services", proxy, LevelRequest},
		{"GET", "/api/v1/watch/services", alice, LevelRequest},
		{"GET", "/api", alice, LevelNone},
		{"GET", "/apis/apps/v1", alice, LevelNone},
		{"GET", "/version", alice, LevelNone},
		{"GET", "/version", anon, LevelMetadata},
		{"GET", "/healthz", alice, LevelMetadata},
		{"GET", "/apis/extensions/v1beta1/namespaces/default/ingresses", alice, LevelRequest},
		{"GET", "/apis/apps/v1/namespaces/default/deployments", alice, LevelMetadata},
		{"GET", "/api/v1/nodes/n1", alice, LevelRequest},
	} {
		got := p.Evaluate(attrs(t, c.method, c.path, c.user))
		if got.Level != c.want {
			t.Errorf("%s %s as %s: level %s, want %s", c.method, c.path, c.user.Name, got.Level, c.want)
		}
		if !slices.Contains(got.OmitStages, StageRequestReceived) {
			t.Errorf("%s %s: omitted stages %v lack the policy's RequestReceived", c.method, c.path, got.OmitStages)
		}
	}
}

// TestPolicyRuleMatching covers the matching cases of upstream's checker: wildcards of
// resources and subresources, groups, resource names, namespaces and paths.
func TestPolicyRuleMatching(t *testing.T) {
	bob := &filters.User{Name: "bob", Groups: []string{"ops"}}
	for _, c := range []struct {
		name   string
		rule   PolicyRule
		method string
		path   string
		match  bool
	}{
		{"empty rule matches all", PolicyRule{}, "GET", "/api/v1/pods", true},
		{"empty rule matches paths", PolicyRule{}, "GET", "/metrics", true},
		{"user", PolicyRule{Users: []string{"bob"}}, "GET", "/api/v1/pods", true},
		{"other user", PolicyRule{Users: []string{"carol"}}, "GET", "/api/v1/pods", false},
		{"group", PolicyRule{UserGroups: []string{"x", "ops"}}, "GET", "/api/v1/pods", true},
		{"other group", PolicyRule{UserGroups: []string{"dev"}}, "GET", "/api/v1/pods", false},
		{"verb", PolicyRule{Verbs: []string{"list"}}, "GET", "/api/v1/pods", true},
		{"other verb", PolicyRule{Verbs: []string{"get"}}, "GET", "/api/v1/pods", false},
		{"non-resource verb", PolicyRule{Verbs: []string{"post"}}, "POST", "/logs", true},
		{"resource", PolicyRule{Resources: []GroupResources{{Resources: []string{"pods"}}}}, "GET", "/api/v1/namespaces/a/pods/p", true},
		{"resource not subresource", PolicyRule{Resources: []GroupResources{{Resources: []string{"pods"}}}}, "GET", "/api/v1/namespaces/a/pods/p/log", false},
		{"subresource", PolicyRule{Resources: []GroupResources{{Resources: []string{"pods/log"}}}}, "GET", "/api/v1/namespaces/a/pods/p/log", true},
		{"star", PolicyRule{Resources: []GroupResources{{Resources: []string{"*"}}}}, "GET", "/api/v1/namespaces/a/pods/p/log", true},
		{"star subresource", PolicyRule{Resources: []GroupResources{{Group: "apps", Resources: []string{"*/scale"}}}}, "PUT", "/apis/apps/v1/namespaces/a/deployments/d/scale", true},
		{"star subresource not object", PolicyRule{Resources: []GroupResources{{Group: "apps", Resources: []string{"*/scale"}}}}, "PUT", "/apis/apps/v1/namespaces/a/deployments/d", false},
		{"resource star", PolicyRule{Resources: []GroupResources{{Resources: []string{"pods/*"}}}}, "POST", "/api/v1/namespaces/a/pods/p/exec", true},
		{"resource star object", PolicyRule{Resources: []GroupResources{{Resources: []string{"pods/*"}}}}, "GET", "/api/v1/namespaces/a/pods/p", true},
		{"resource star other", PolicyRule{Resources: []GroupResources{{Resources: []string{"pods/*"}}}}, "GET", "/api/v1/namespaces/a/podtemplates/p", false},
		{"other group", PolicyRule{Resources: []GroupResources{{Group: "apps"}}}, "GET", "/api/v1/pods", false},
		{"whole group", PolicyRule{Resources: []GroupResources{{Group: "apps"}}}, "GET", "/apis/apps/v1/deployments", true},
		{"resource name", PolicyRule{Resources: []GroupResources{{Resources: []string{"secrets"}, ResourceNames: []string{"s"}}}}, "GET", "/api/v1/namespaces/a/secrets/s", true},
		{"other resource name", PolicyRule{Resources: []GroupResources{{Resources: []string{"secrets"}, ResourceNames: []string{"s"}}}}, "GET", "/api/v1/namespaces/a/secrets/t", false},
		{"resource name of a list", PolicyRule{Resources: []GroupResources{{Resources: []string{"secrets"}, ResourceNames: []string{"s"}}}}, "GET", "/api/v1/namespaces/a/secrets", false},
		{"namespace", PolicyRule{Namespaces: []string{"a"}}, "GET", "/api/v1/namespaces/a/pods", true},
		{"other namespace", PolicyRule{Namespaces: []string{"b"}}, "GET", "/api/v1/namespaces/a/pods", false},
		{"cluster scope is the empty namespace", PolicyRule{Namespaces: []string{""}}, "GET", "/api/v1/nodes", true},
		{"namespaces not paths", PolicyRule{Namespaces: []string{""}}, "GET", "/healthz", false},
		{"resources not paths", PolicyRule{Resources: []GroupResources{{Resources: []string{"*"}}}}, "GET", "/healthz", false},
		{"path", PolicyRule{NonResourceURLs: []string{"/healthz"}}, "GET", "/healthz", true},
		{"path not prefix", PolicyRule{NonResourceURLs: []string{"/healthz"}}, "GET", "/healthz/etcd", false},
		{"path star", PolicyRule{NonResourceURLs: []string{"/healthz*"}}, "GET", "/healthz/etcd", true},
		{"path slash star", PolicyRule{NonResourceURLs: []string{"/logs/*"}}, "GET", "/logs", false},
		{"all paths", PolicyRule{NonResourceURLs: []string{"*"}}, "GET", "/anything", true},
		{"paths not resources", PolicyRule{NonResourceURLs: []string{"*"}}, "GET", "/api/v1/pods", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.rule
			r.Level = LevelMetadata
			p := &Policy{Rules: []PolicyRule{r}}
			got := p.Evaluate(attrs(t, c.method, c.path, bob)).Level == LevelMetadata
			if got != c.match {
				t.Errorf("match = %v, want %v", got, c.match)
			}
		})
	}
}

func TestPolicyFirstRuleWinsAndOptions(t *testing.T) {
	f := false
	p := &Policy{OmitStages: []Stage{StageRequestReceived}, OmitManagedFields: true, Rules: []PolicyRule{
		{Level: LevelNone, Verbs: []string{"watch"}},
		{Level: LevelRequest, Resources: []GroupResources{{Resources: []string{"configmaps"}}}, OmitStages: []Stage{StageResponseStarted}, OmitManagedFields: &f},
		{Level: LevelRequestResponse, Resources: []GroupResources{{Resources: []string{"configmaps"}}}},
		{Level: LevelMetadata},
	}}
	u := &filters.User{Name: "u"}
	if got := p.Evaluate(attrs(t, "GET", "/api/v1/configmaps?watch=true", u)); got.Level != LevelNone {
		t.Errorf("watch: %s", got.Level)
	}
	got := p.Evaluate(attrs(t, "GET", "/api/v1/namespaces/a/configmaps/c", u))
	if got.Level != LevelRequest || got.OmitManagedFields || !got.omits(StageRequestReceived) || !got.omits(StageResponseStarted) || got.omits(StageResponseComplete) {
		t.Errorf("configmaps: %+v", got)
	}
	got = p.Evaluate(attrs(t, "GET", "/api/v1/namespaces/a/secrets/c", u))
	if got.Level != LevelMetadata || !got.OmitManagedFields || got.omits(StageResponseStarted) {
		t.Errorf("secrets: %+v", got)
	}
	if got := (&Policy{Rules: []PolicyRule{{Level: LevelMetadata, Users: []string{"x"}}}}).Evaluate(attrs(t, "GET", "/api", u)); got.Level != LevelNone {
		t.Errorf("no rule matched: %s, want None", got.Level)
	}
	if got := p.Evaluate(attrs(t, "GET", "/api", nil)); got.Level != LevelMetadata {
		t.Errorf("no user: %s", got.Level)
	}
	if got := (&Policy{Rules: []PolicyRule{{Level: LevelMetadata, UserGroups: []string{"g"}}}}).Evaluate(attrs(t, "GET", "/api", nil)); got.Level != LevelNone {
		t.Errorf("groups without a user: %s", got.Level)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"no apiVersion", "kind: Policy\nrules: [{level: None}]", "apiVersion is missing"},
		{"old version", "apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: None}]", `unknown group version "audit.k8s.io/v1beta1"`},
		{"kind", "apiVersion: audit.k8s.io/v1\nkind: Pod\nrules: [{level: None}]", `kind "Pod" is not Policy`},
		{"no rules", "apiVersion: audit.k8s.io/v1\nkind: Policy", "no rules"},
		{"no level", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{verbs: [get]}]", "rules[0].level: Required value"},
		{"bad level", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Everything}]", `rules[0].level: Unsupported value: "Everything"`},
		{"bad stage", "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [Done]\nrules: [{level: None}]", `omitStages[0]: Invalid value: "Done"`},
		{"bad rule stage", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, omitStages: [x]}]", `rules[0].omitStages[0]`},
		{"url slash", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, nonResourceURLs: [healthz]}]", "must begin with a '/'"},
		{"url star", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, nonResourceURLs: [/a*/b]}]", "must be the final character"},
		{"urls and resources", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, nonResourceURLs: [/a], namespaces: [x]}]", "both regular resources and non-resource URLs"},
		{"group", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, resources: [{group: Not_A_Group}]}]", "rules[0].resources.group"},
		{"names without resources", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, resources: [{resourceNames: [a]}]}]", "requires at least one resource"},
		{"not yaml", "rules: [", "decode"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ParsePolicy([]byte(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one with %q", err, c.want)
			}
		})
	}
	p, warnings, err := ParsePolicy([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Metadata, colour: blue}]"))
	if err != nil || len(warnings) != 1 || p.Rules[0].Level != LevelMetadata {
		t.Fatalf("unknown field: %v %v %+v", err, warnings, p)
	}
}

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(docsPolicy))
	f.Add([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, nonResourceURLs: ['*']}]"))
	f.Add([]byte(`{"apiVersion":"audit.k8s.io/v1","kind":"Policy","rules":[{"level":"Metadata","resources":[{"resources":["*/scale"]}]}]}`))
	u := &filters.User{Name: "u", Groups: []string{"g"}}
	reqs := []authorizer.Attributes{
		authorizer.RequestAttributes(httptest.NewRequest("GET", "/api/v1/namespaces/a/pods/p/log", nil), u),
		authorizer.RequestAttributes(httptest.NewRequest("GET", "/healthz", nil), u),
		authorizer.RequestAttributes(httptest.NewRequest("GET", "/", nil), nil),
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, _, err := ParsePolicy(data)
		if err != nil {
			return
		}
		for _, a := range reqs {
			if c := p.Evaluate(a); !c.Level.valid() {
				t.Fatalf("level %q from a valid policy", c.Level)
			}
		}
	})
}
