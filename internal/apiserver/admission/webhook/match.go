package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/webhookclient"
)

// compiledConfig is a configuration with its webhooks ready to match.
type compiledConfig struct {
	uid, name, resourceVersion string
	webhooks                   []*compiledWebhook
}

// compiledWebhook is one webhook of either kind, with its selectors parsed.
type compiledWebhook struct {
	config, name   string
	rules          []admissionregistrationv1.RuleWithOperations
	failOpen       bool
	equivalent     bool
	namespaceSel   labels.Selector
	objectSel      labels.Selector
	selectorErr    error // a selector or condition that does not compile
	timeout        time.Duration
	endpoint       webhookclient.Config
	reviewVersion  string
	reinvokeIfNeed bool
	conditions     []condition
}

// compileConfig compiles every webhook of a Validating- or
// MutatingWebhookConfiguration (stored, hence defaulted and valid).
func compileConfig(obj runtime.Object) *compiledConfig {
	c := &compiledConfig{}
	switch o := obj.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		c.uid, c.name, c.resourceVersion = string(o.UID), o.Name, o.ResourceVersion
		for _, w := range o.Webhooks {
			c.webhooks = append(c.webhooks, compileWebhook(o.Name, w.Name, w.Rules, w.FailurePolicy, w.MatchPolicy,
				w.NamespaceSelector, w.ObjectSelector, w.TimeoutSeconds, w.ClientConfig, w.AdmissionReviewVersions, nil, w.MatchConditions))
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		c.uid, c.name, c.resourceVersion = string(o.UID), o.Name, o.ResourceVersion
		for _, w := range o.Webhooks {
			c.webhooks = append(c.webhooks, compileWebhook(o.Name, w.Name, w.Rules, w.FailurePolicy, w.MatchPolicy,
				w.NamespaceSelector, w.ObjectSelector, w.TimeoutSeconds, w.ClientConfig, w.AdmissionReviewVersions, w.ReinvocationPolicy, w.MatchConditions))
		}
	}
	return c
}

func compileWebhook(config, name string, rules []admissionregistrationv1.RuleWithOperations,
	fp *admissionregistrationv1.FailurePolicyType, mp *admissionregistrationv1.MatchPolicyType,
	nsSel, objSel *metav1.LabelSelector, timeout *int32, cc admissionregistrationv1.WebhookClientConfig,
	versions []string, reinvoke *admissionregistrationv1.ReinvocationPolicyType, conds []admissionregistrationv1.MatchCondition) *compiledWebhook {
	h := &compiledWebhook{
		config: config, name: name, rules: rules, endpoint: clientConfig(cc),
		failOpen:       fp != nil && *fp == admissionregistrationv1.Ignore,
		equivalent:     mp == nil || *mp == admissionregistrationv1.Equivalent,
		timeout:        10 * time.Second,
		reinvokeIfNeed: reinvoke != nil && *reinvoke == admissionregistrationv1.IfNeededReinvocationPolicy,
		namespaceSel:   labels.Everything(), objectSel: labels.Everything(),
	}
	if timeout != nil {
		h.timeout = time.Duration(*timeout) * time.Second
	}
	for _, v := range versions {
		if v == "v1" || v == "v1beta1" {
			h.reviewVersion = v
			break
		}
	}
	var err error
	if h.conditions, err = compileConditions(conds); err != nil {
		h.selectorErr = err
	}
	if nsSel != nil {
		if h.namespaceSel, err = metav1.LabelSelectorAsSelector(nsSel); err != nil {
			h.selectorErr = fmt.Errorf("namespaceSelector: %w", err)
		}
	}
	if objSel != nil {
		if h.objectSel, err = metav1.LabelSelectorAsSelector(objSel); err != nil {
			h.selectorErr = fmt.Errorf("objectSelector: %w", err)
		}
	}
	return h
}

// clientConfig is where a webhook configuration's client config points.
func clientConfig(cc admissionregistrationv1.WebhookClientConfig) webhookclient.Config {
	out := webhookclient.Config{URL: cc.URL, CABundle: cc.CABundle}
	if s := cc.Service; s != nil {
		out.Service = &webhookclient.Service{Namespace: s.Namespace, Name: s.Name, Path: s.Path, Port: s.Port}
	}
	return out
}

// failed decides what an error of a webhook does to the request: nothing when the
// webhook fails open (it is logged), else a 500 naming the webhook. A refusal by
// the webhook itself is not an error of this kind.
func (h *compiledWebhook) failed(log *slog.Logger, a *admission.Attributes, err error) error {
	if h.failOpen {
		log.Warn("admission webhook failed, ignored (failurePolicy Ignore)", "webhook", h.name, "resource", a.Resource.String(), "err", err)
		return nil
	}
	return apierrors.NewInternalError(fmt.Errorf("failed calling webhook %q: %w", h.name, err))
}

// invocation is a webhook selected for a request, with the version of the resource
// it is sent (the request's, or with matchPolicy Equivalent another one its rules
// name).
type invocation struct {
	hook     *compiledWebhook
	resource schema.GroupVersionResource
	kind     schema.GroupVersionKind
}

// match reports whether h selects the request (nil when it does not): its rules (in
// the request's version, else an equivalent one), namespace and object selectors.
func (p *Plugin) match(ctx context.Context, h *compiledWebhook, a *admission.Attributes) (*invocation, error) {
	if h.selectorErr != nil {
		return nil, h.selectorErr
	}
	resource, kind := a.Resource, a.Kind
	if !h.matchesRules(a, a.Resource) {
		if !h.equivalent || !h.namesResource(a.Resource.GroupResource()) {
			return nil, nil
		}
		found := false
		for _, v := range p.srv.Versions(a.Resource.GroupResource()) {
			gvr := a.Resource.GroupResource().WithVersion(v)
			if v != a.Resource.Version && h.matchesRules(a, gvr) {
				resource, kind, found = gvr, a.Kind.GroupKind().WithVersion(v), true
				break
			}
		}
		if !found {
			return nil, nil
		}
	}
	inv := &invocation{hook: h, resource: resource, kind: kind}
	if ok, err := p.matchesNamespace(ctx, h, a); err != nil || !ok {
		return nil, err
	}
	if !h.objectSel.Empty() && !objectLabelsMatch(h.objectSel, a.Object) && !objectLabelsMatch(h.objectSel, a.OldObject) {
		return nil, nil
	}
	if ok, err := p.matchesConditions(ctx, h, inv, a); err != nil || !ok {
		return nil, err
	}
	return inv, nil
}

// matchesRules reports whether a rule of h names the operation and the resource gvr
// (with the request's subresource and scope).
func (h *compiledWebhook) matchesRules(a *admission.Attributes, gvr schema.GroupVersionResource) bool {
	for _, r := range h.rules {
		if ruleMatches(r, a, gvr) {
			return true
		}
	}
	return false
}

// namesResource reports whether a rule of h could name gr in some version (its
// group and resource match), before other versions are looked for.
func (h *compiledWebhook) namesResource(gr schema.GroupResource) bool {
	for _, r := range h.rules {
		if !oneOf(r.APIGroups, gr.Group) {
			continue
		}
		for _, res := range r.Resources {
			name, _, _ := strings.Cut(res, "/")
			if name == "*" || name == gr.Resource {
				return true
			}
		}
	}
	return false
}

func ruleMatches(r admissionregistrationv1.RuleWithOperations, a *admission.Attributes, gvr schema.GroupVersionResource) bool {
	opOK := false
	for _, op := range r.Operations {
		if op == admissionregistrationv1.OperationAll || string(op) == string(a.Operation) {
			opOK = true
			break
		}
	}
	if !opOK || !oneOf(r.APIGroups, gvr.Group) || !oneOf(r.APIVersions, gvr.Version) {
		return false
	}
	if r.Scope != nil {
		switch *r.Scope {
		case admissionregistrationv1.ClusterScope:
			if a.Namespace != "" {
				return false
			}
		case admissionregistrationv1.NamespacedScope:
			if a.Namespace == "" {
				return false
			}
		}
	}
	for _, res := range r.Resources {
		if res == "*/*" {
			return true
		}
		name, sub, hasSub := strings.Cut(res, "/")
		if name != "*" && name != gvr.Resource {
			continue
		}
		if !hasSub && a.Subresource == "" || hasSub && (sub == "*" || sub == a.Subresource) {
			return true
		}
	}
	return false
}

func oneOf(list []string, v string) bool {
	for _, x := range list {
		if x == "*" || x == v {
			return true
		}
	}
	return false
}

// matchesNamespace applies the namespace selector: to the labels of the request's
// namespace, or of the Namespace itself when the request is on one; requests on
// other cluster-scoped objects always match.
func (p *Plugin) matchesNamespace(ctx context.Context, h *compiledWebhook, a *admission.Attributes) (bool, error) {
	if h.namespaceSel.Empty() {
		return true, nil
	}
	if a.Resource.Group == "" && a.Resource.Resource == "namespaces" {
		return objectLabelsMatch(h.namespaceSel, a.Object) || objectLabelsMatch(h.namespaceSel, a.OldObject), nil
	}
	if a.Namespace == "" {
		return true, nil
	}
	obj, err := p.srv.Get(ctx, schema.GroupResource{Resource: "namespaces"}, "", a.Namespace)
	if err != nil {
		return false, fmt.Errorf("namespace %q: %w", a.Namespace, err)
	}
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return false, fmt.Errorf("namespace %q is a %T", a.Namespace, obj)
	}
	return h.namespaceSel.Matches(labels.Set(ns.Labels)), nil
}

func objectLabelsMatch(sel labels.Selector, obj runtime.Object) bool {
	if obj == nil {
		return false
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return sel.Matches(labels.Set(nil))
	}
	return sel.Matches(labels.Set(m.GetLabels()))
}
