package controlplane

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/apiserver"
	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/apiserver/admission/defaultstorageclass"
	"github.com/kubette/kubette/internal/apiserver/admission/defaulttolerationseconds"
	"github.com/kubette/kubette/internal/apiserver/admission/limitranger"
	"github.com/kubette/kubette/internal/apiserver/admission/noderestriction"
	"github.com/kubette/kubette/internal/apiserver/admission/podsecurity"
	"github.com/kubette/kubette/internal/apiserver/admission/priority"
	"github.com/kubette/kubette/internal/apiserver/admission/rbacescalation"
	"github.com/kubette/kubette/internal/apiserver/admission/resourcequota"
	"github.com/kubette/kubette/internal/apiserver/admission/runtimeclass"
	saadmission "github.com/kubette/kubette/internal/apiserver/admission/serviceaccount"
	"github.com/kubette/kubette/internal/apiserver/admission/storageobjectinuseprotection"
	"github.com/kubette/kubette/internal/apiserver/admission/validatingadmissionpolicy"
	"github.com/kubette/kubette/internal/apiserver/admission/webhook"
	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/authorizer/node"
	"github.com/kubette/kubette/internal/apiserver/authorizer/rbac"
	"github.com/kubette/kubette/internal/apiserver/authorizer/review"
	"github.com/kubette/kubette/internal/apiserver/filters"
	"github.com/kubette/kubette/internal/eviction"
	"github.com/kubette/kubette/internal/metrics/scraper"
	"github.com/kubette/kubette/internal/pki"
	"github.com/kubette/kubette/internal/rbacpolicy"
)

// The API server's admission plugins, actions and authorizers, as upstream's defaults.
// Each plugin lives in its own package; this file only puts them in upstream's order.

// extensionDeps is what the extensions are built from.
type extensionDeps struct {
	cfg     Config
	ca      *pki.CA
	pkiDir  string
	dataDir string
	// sa are the ServiceAccount tokens' key, issuer and authenticator.
	sa *saTokens
	// built holds what extend builds for authorizers, and the server's authorizer for
	// the plugins and actions that ask it (built after them).
	built *built
}

// built is shared between extend and authorizers.
type built struct {
	rbac  *rbac.Authorizer
	authz authorizer.Authorizer
	// metrics is the resource metrics scraper, run once the server is ready.
	metrics *scraper.Scraper
}

// authorizer returns the server's whole authorizer once authorizers has built it.
func (b *built) authorizer() authorizer.Authorizer {
	if b.authz == nil {
		return authorizer.Union{}
	}
	return b.authz
}

// extend builds the admission chain and the actions of the API server s. The chain
// follows upstream's default plugin order: NamespaceLifecycle (built into the server),
// LimitRanger, ServiceAccount, NodeRestriction, PodSecurity, Priority,
// DefaultTolerationSeconds, ... and ResourceQuota last.
func extend(d extensionDeps, s *apiserver.Server) (admission.Chain, map[apiserver.ActionKey]apiserver.Action, error) {
	d.built.rbac = rbac.New(s)
	var err error
	if d.built.metrics, err = metricsAPI(d.cfg, s); err != nil {
		return nil, nil, err
	}
	major, _ := strconv.Atoi(Version.Major)
	minor, _ := strconv.Atoi(strings.TrimSuffix(Version.Minor, "+"))
	psa, err := podsecurity.New(s, nil, major, minor)
	if err != nil {
		return nil, nil, err
	}
	loopback, err := kubernetes.NewForConfig(s.LoopbackConfig())
	if err != nil {
		return nil, nil, fmt.Errorf("loopback client: %w", err)
	}
	chain := admission.Chain{
		{Name: limitranger.Name, Impl: limitranger.New(s)},
		{Name: saadmission.Name, Impl: saadmission.New(s)},
		{Name: noderestriction.Name, Impl: noderestriction.New(s)},
		{Name: "PodSecurity", Impl: psa},
		{Name: priority.Name, Impl: priority.New(s)},
		{Name: defaulttolerationseconds.Name, Impl: defaulttolerationseconds.Plugin{}},
		{Name: runtimeclass.Name, Impl: runtimeclass.New(s)},
		{Name: defaultstorageclass.Name, Impl: defaultstorageclass.New(s)},
		{Name: storageobjectinuseprotection.Name, Impl: storageobjectinuseprotection.Plugin{}},
		// Upstream checks escalation in the RBAC storage, after admission: a validating
		// plugin (it changes nothing) that only looks at RBAC objects.
		{Name: rbacescalation.Name, Impl: &rbacescalation.Plugin{Authorizer: d.built.authorizer, Rules: d.built.rbac}},
		// Dynamic admission, as upstream: mutating webhooks after the built-in
		// mutating plugins, validating webhooks after the policies.
		{Name: webhook.MutatingName, Impl: webhook.NewMutating(s, webhook.Options{Logger: d.cfg.Logger, Authorizer: d.built.authorizer})},
		// Between the webhooks, as upstream: ValidatingAdmissionPolicies.
		{Name: validatingadmissionpolicy.Name, Impl: validatingadmissionpolicy.New(s, d.built.authorizer)},
		{Name: webhook.ValidatingName, Impl: webhook.NewValidating(s, webhook.Options{Logger: d.cfg.Logger, Authorizer: d.built.authorizer})},
		// Last, as upstream: it charges what the plugins before it admitted.
		{Name: resourcequota.Name, Impl: resourcequota.New(s, loopback.CoreV1())},
	}
	chain, err = withoutPlugins(chain, d.cfg.DisableAdmissionPlugins)
	if err != nil {
		return nil, nil, err
	}
	actions := map[apiserver.ActionKey]apiserver.Action{}
	reviews := &review.Reviews{Authorizer: d.built.authorizer,
		Rules: func(ctx context.Context, u *filters.User, ns string) ([]rbacv1.PolicyRule, bool, error) {
			rules, err := d.built.rbac.RulesFor(ctx, u, ns)
			return rules, false, err
		}}
	for k, a := range reviews.Actions() {
		actions[k] = a
	}
	for k, a := range serviceAccountActions(d.sa, d.cfg, s) {
		actions[k] = a
	}
	for k, a := range (&eviction.Evictions{Client: loopback}).Actions() {
		actions[k] = a
	}
	return chain, actions, nil
}

// withoutPlugins drops the named plugins from chain (--disable-admission-plugins); a name
// of no plugin in the chain is an error, as upstream's.
func withoutPlugins(chain admission.Chain, disabled []string) (admission.Chain, error) {
	if len(disabled) == 0 {
		return chain, nil
	}
	off := map[string]bool{}
	for _, name := range disabled {
		off[name] = true
	}
	out := admission.Chain{}
	for _, p := range chain {
		if off[p.Name] {
			delete(off, p.Name)
			continue
		}
		out = append(out, p)
	}
	for name := range off {
		return nil, fmt.Errorf("--disable-admission-plugins: unknown plugin %q", name)
	}
	return out, nil
}

// authorizers returns the API server's authorizer: system:masters first, then the
// others in the order of --authorization-mode (Config.AuthorizationModes; by default
// Node then RBAC, with the default policy of package rbacpolicy).
func authorizers(d extensionDeps, s *apiserver.Server) (authorizer.Authorizer, error) {
	z := authorizer.Union{authorizer.PrivilegedGroup("system:masters")}
	modes := d.cfg.AuthorizationModes
	if len(modes) == 0 {
		modes = []string{"Node", "RBAC"}
	}
	for _, m := range modes {
		switch strings.TrimSpace(m) {
		case "Node":
			z = append(z, node.New(s, rbacpolicy.NodeRules()))
		case "RBAC":
			z = append(z, d.built.rbac)
		case "AlwaysAllow":
			z = append(z, authorizer.AlwaysAllow{})
		default:
			return nil, fmt.Errorf("--authorization-mode: unknown authorizer %q (want Node, RBAC or AlwaysAllow)", m)
		}
	}
	d.built.authz = z
	return z, nil
}
