// Package podsecurity is the PodSecurity admission plugin: the Pod Security Standards
// (privileged, baseline, restricted) enforced, audited and warned about per namespace
// through the pod-security.kubernetes.io/* labels. The decisions are upstream's own
// library (k8s.io/pod-security-admission): this package only connects it to the API
// server's admission chain and watch caches.
package podsecurity

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	psadmission "k8s.io/pod-security-admission/admission"
	psaconfig "k8s.io/pod-security-admission/admission/api"
	"k8s.io/pod-security-admission/admission/api/load"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/metrics"
	"k8s.io/pod-security-admission/policy"

	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

// Objects reads the cluster's current objects (the API server's watch caches).
type Objects interface {
	Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error)
	List(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error)
}

// Plugin is the PodSecurity validating admission plugin.
type Plugin struct {
	psa *psadmission.Admission
	// handled are the resources the plugin looks at: namespaces, pods and the kinds
	// with a pod template; every other write passes without a look.
	handled map[schema.GroupResource]bool
}

// New builds the plugin with the given configuration (nil: upstream's defaults, every
// mode privileged at the latest version and no exemptions). version is the Kubernetes
// minor version the server serves: "latest" means its checks.
func New(objs Objects, cfg *psaconfig.PodSecurityConfiguration, major, minor int) (*Plugin, error) {
	if cfg == nil {
		var err error
		if cfg, err = load.LoadFromData(nil); err != nil {
			return nil, fmt.Errorf("pod security defaults: %w", err)
		}
	}
	v := psapi.MajorMinorVersion(major, minor)
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), &v)
	if err != nil {
		return nil, fmt.Errorf("pod security checks: %w", err)
	}
	a := &psadmission.Admission{
		Configuration:    cfg,
		Evaluator:        evaluator,
		Metrics:          noMetrics{},
		PodSpecExtractor: psadmission.DefaultPodSpecExtractor{},
		NamespaceGetter:  namespaces{objs},
		PodLister:        pods{objs},
	}
	if err := a.CompleteConfiguration(); err != nil {
		return nil, fmt.Errorf("pod security configuration: %w", err)
	}
	if err := a.ValidateConfiguration(); err != nil {
		return nil, fmt.Errorf("pod security configuration: %w", err)
	}
	p := &Plugin{psa: a, handled: map[schema.GroupResource]bool{
		{Resource: "namespaces"}: true, {Resource: "pods"}: true,
	}}
	for _, gr := range (psadmission.DefaultPodSpecExtractor{}).PodSpecResources() {
		p.handled[gr] = true
	}
	return p, nil
}

// Validate refuses pods that violate their namespace's enforced standard and namespaces
// with invalid labels; it adds upstream's warnings (violations of the warn level, pods a
// stricter enforce label would refuse).
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Operation != admission.Create && a.Operation != admission.Update {
		return nil
	}
	if !p.handled[a.Resource.GroupResource()] {
		return nil
	}
	resp := p.psa.Validate(ctx, attributes{a})
	for _, w := range resp.Warnings {
		admission.AddWarning(ctx, w)
	}
	for k, v := range resp.AuditAnnotations {
		filters.AddAuditAnnotation(ctx, psapi.AuditAnnotationPrefix+k, v)
	}
	if resp.Allowed {
		return nil
	}
	if resp.Result == nil {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, fmt.Errorf("refused by PodSecurity"))
	}
	return &apierrors.StatusError{ErrStatus: *resp.Result}
}

// attributes presents a write to the library.
type attributes struct{ a *admission.Attributes }

func (x attributes) GetName() string                          { return x.a.Name }
func (x attributes) GetNamespace() string                     { return x.a.Namespace }
func (x attributes) GetResource() schema.GroupVersionResource { return x.a.Resource }
func (x attributes) GetKind() schema.GroupVersionKind         { return x.a.Kind }
func (x attributes) GetSubresource() string                   { return x.a.Subresource }
func (x attributes) GetObject() (runtime.Object, error)       { return x.a.Object, nil }
func (x attributes) GetOldObject() (runtime.Object, error)    { return x.a.OldObject, nil }

func (x attributes) GetOperation() admissionv1.Operation {
	return admissionv1.Operation(x.a.Operation)
}

func (x attributes) GetUserName() string {
	if x.a.User == nil {
		return ""
	}
	return x.a.User.Name
}

// namespaces reads namespaces from the watch cache.
type namespaces struct{ objs Objects }

func (n namespaces) GetNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	obj, err := n.objs.Get(ctx, schema.GroupResource{Resource: "namespaces"}, "", name)
	if err != nil {
		return nil, err
	}
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return nil, fmt.Errorf("namespace %s: unexpected %T", name, obj)
	}
	return ns, nil
}

// pods lists a namespace's pods from the watch cache (for the warnings of a namespace
// whose enforce label becomes stricter).
type pods struct{ objs Objects }

func (p pods) ListPods(ctx context.Context, namespace string) ([]*corev1.Pod, error) {
	objs, err := p.objs.List(ctx, schema.GroupResource{Resource: "pods"}, namespace)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok {
			out = append(out, pod)
		}
	}
	return out, nil
}

// noMetrics drops the library's metrics (kubette's /metrics does not carry them yet).
type noMetrics struct{}

func (noMetrics) RecordEvaluation(metrics.Decision, psapi.LevelVersion, metrics.Mode, psapi.Attributes) {
}
func (noMetrics) RecordExemption(psapi.Attributes)           {}
func (noMetrics) RecordError(fatal bool, _ psapi.Attributes) {}
