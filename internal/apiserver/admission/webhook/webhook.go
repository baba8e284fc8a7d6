// Package webhook is dynamic admission control through webhooks, as upstream's
// MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins: the API server
// reads the admissionregistration.k8s.io/v1 webhook configurations, and for each
// write (and connect) that a webhook's rules, selectors and match conditions select,
// sends an admission.k8s.io AdmissionReview over TLS to the webhook's URL or Service
// and applies the answer: a refusal, a JSON patch (mutating webhooks), warnings.
//
// Mutating webhooks are called one after another in the order of their
// configurations' names and of the webhooks in each, and a webhook with
// reinvocationPolicy IfNeeded is called once more when a later one changed the
// object. Validating webhooks are called at the same time. A webhook that cannot be
// reached, times out or answers nonsense fails the request when its failurePolicy
// is Fail and is skipped when it is Ignore. Requests on the webhook and policy
// configurations themselves never go to webhooks, so that a broken webhook can
// always be removed.
package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/webhookclient"
)

// The plugins' names, as upstream's.
const (
	MutatingName   = "MutatingAdmissionWebhook"
	ValidatingName = "ValidatingAdmissionWebhook"
)

// Server is what the plugins need of the API server.
type Server interface {
	// Get and List read the cluster (configurations, namespaces, Services and
	// EndpointSlices), typed objects for built-in kinds.
	Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error)
	List(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error)
	// Versions lists the served versions of a group-resource, for matchPolicy
	// Equivalent.
	Versions(gr schema.GroupResource) []string
	// Convert returns obj as the kind of resource gvr (the same object when it already
	// is): a webhook that asked for another version of the resource gets it so.
	Convert(ctx context.Context, obj runtime.Object, gvr schema.GroupVersionResource) (runtime.Object, error)
	// Decode decodes the JSON of an object of resource gvr patched by a webhook, as a
	// request's body is decoded (a custom resource is pruned by its schema).
	Decode(gvr schema.GroupVersionResource, data []byte) (runtime.Object, error)
}

var (
	validatingConfigs = schema.GroupResource{Group: admissionregistrationv1.GroupName, Resource: "validatingwebhookconfigurations"}
	mutatingConfigs   = schema.GroupResource{Group: admissionregistrationv1.GroupName, Resource: "mutatingwebhookconfigurations"}
)

// Plugin is one of the two webhook admission plugins.
type Plugin struct {
	mutating bool
	srv      Server
	client   *webhookclient.Client
	log      *slog.Logger
	// authorizer backs the authorizer variable of matchConditions (nil: none).
	authorizer func() authorizer.Authorizer

	mu    sync.Mutex
	cache map[string]*compiledConfig // by configuration UID
	// last is the webhooks of the last list, reused while the list is the same.
	last struct {
		keys     []configKey
		webhooks []*compiledWebhook
	}
}

// Options configure the plugins.
type Options struct {
	// Logger receives the failures of webhooks that fail open (default slog.Default()).
	Logger *slog.Logger
	// Authorizer returns the server's authorizer, for matchConditions' authorizer
	// variable; nil leaves it unset.
	Authorizer func() authorizer.Authorizer
}

// NewMutating returns the MutatingAdmissionWebhook plugin (it implements
// admission.Mutator).
func NewMutating(srv Server, opts Options) *Mutating {
	return &Mutating{newPlugin(true, srv, opts)}
}

// NewValidating returns the ValidatingAdmissionWebhook plugin (it implements
// admission.Validator).
func NewValidating(srv Server, opts Options) *Validating {
	return &Validating{newPlugin(false, srv, opts)}
}

func newPlugin(mutating bool, srv Server, opts Options) *Plugin {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Plugin{mutating: mutating, srv: srv, client: webhookclient.New(srv), log: opts.Logger, authorizer: opts.Authorizer,
		cache: map[string]*compiledConfig{}}
}

// HandlesConnect reports that webhooks see connect requests too.
func (p *Plugin) HandlesConnect() bool { return true }

// Mutating is the MutatingAdmissionWebhook plugin.
type Mutating struct{ *Plugin }

// Admit calls the mutating webhooks that select the request, in order, and applies
// their patches to a.Object.
func (m *Mutating) Admit(ctx context.Context, a *admission.Attributes) error {
	if exempt(a) {
		return nil
	}
	hooks, err := m.webhooks(ctx)
	if err != nil || len(hooks) == 0 {
		return err
	}
	return m.admit(ctx, a, hooks)
}

// Validating is the ValidatingAdmissionWebhook plugin.
type Validating struct{ *Plugin }

// Validate calls the validating webhooks that select the request, at the same
// time; the first refusal (in the webhooks' order) is the answer.
func (v *Validating) Validate(ctx context.Context, a *admission.Attributes) error {
	if exempt(a) {
		return nil
	}
	hooks, err := v.webhooks(ctx)
	if err != nil || len(hooks) == 0 {
		return err
	}
	var matched []*invocation
	for _, h := range hooks {
		inv, err := v.match(ctx, h, a)
		if err != nil {
			if e := h.failed(v.log, a, err); e != nil {
				return e
			}
			continue
		}
		if inv != nil {
			matched = append(matched, inv)
		}
	}
	errs := make([]error, len(matched))
	var wg sync.WaitGroup
	for i, inv := range matched {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = v.call(ctx, inv, a, false)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// webhooks returns the compiled webhooks of every configuration of the plugin's
// kind, ordered by configuration name then position.
func (p *Plugin) webhooks(ctx context.Context) ([]*compiledWebhook, error) {
	gr := validatingConfigs
	if p.mutating {
		gr = mutatingConfigs
	}
	objs, err := p.srv.List(ctx, gr, "")
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", gr, err)
	}
	if len(objs) == 0 {
		return nil, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sameAsLast(objs) {
		return p.last.webhooks, nil
	}
	configs := make([]*compiledConfig, 0, len(objs))
	seen := make(map[string]bool, len(objs))
	keys := make([]configKey, 0, len(objs))
	for _, obj := range objs {
		c := p.compiled(obj)
		if c != nil {
			seen[c.uid] = true
			configs = append(configs, c)
			keys = append(keys, configKey{c.uid, c.resourceVersion})
		}
	}
	for uid := range p.cache {
		if !seen[uid] {
			delete(p.cache, uid)
		}
	}
	sort.Slice(configs, func(i, j int) bool { return configs[i].name < configs[j].name })
	var out []*compiledWebhook
	for _, c := range configs {
		out = append(out, c.webhooks...)
	}
	p.last.keys, p.last.webhooks = keys, out
	return out, nil
}

// configKey names one version of a configuration.
type configKey struct{ uid, resourceVersion string }

// sameAsLast reports whether objs are the configurations the last list compiled,
// in the same order (the watch cache lists them sorted by key). The caller holds p.mu.
func (p *Plugin) sameAsLast(objs []runtime.Object) bool {
	if len(objs) != len(p.last.keys) {
		return false
	}
	for i, obj := range objs {
		m, ok := obj.(metav1.Object)
		if !ok || string(m.GetUID()) != p.last.keys[i].uid || m.GetResourceVersion() != p.last.keys[i].resourceVersion {
			return false
		}
	}
	return true
}

// compiled returns the compiled form of a configuration, from the cache when its
// resourceVersion is the one compiled. The caller holds p.mu.
func (p *Plugin) compiled(obj runtime.Object) *compiledConfig {
	uid, rv := "", ""
	switch c := obj.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		uid, rv = string(c.UID), c.ResourceVersion
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		uid, rv = string(c.UID), c.ResourceVersion
	default:
		return nil
	}
	if c, ok := p.cache[uid]; ok && c.resourceVersion == rv {
		return c
	}
	c := compileConfig(obj)
	p.cache[uid] = c
	return c
}

// exempt reports the requests no webhook sees: those on the admission
// configurations themselves, as upstream's.
func exempt(a *admission.Attributes) bool {
	if a.Resource.Group != admissionregistrationv1.GroupName {
		return false
	}
	switch a.Resource.Resource {
	case "validatingwebhookconfigurations", "mutatingwebhookconfigurations",
		"validatingadmissionpolicies", "validatingadmissionpolicybindings",
		"mutatingadmissionpolicies", "mutatingadmissionpolicybindings":
		return true
	}
	return false
}
