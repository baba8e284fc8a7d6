// Package limitranger is the LimitRanger admission plugin, as upstream's
// plugin/pkg/admission/limitranger: a new pod's containers and init containers get the
// default requests and limits of the namespace's LimitRanges (Container items'
// defaultRequest and default) where they give none, noted in the
// kubernetes.io/limit-ranger annotation; then the pod (each container, and the pod's
// sums) and PersistentVolumeClaims are checked against every item's min, max and
// maxLimitRequestRatio, and refused with upstream's 403 messages.
package limitranger

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/quota"
)

// Name is the plugin's name, as upstream's.
const Name = "LimitRanger"

// Annotation lists on a pod the defaults the plugin set.
const Annotation = "kubernetes.io/limit-ranger"

var (
	limitRanges = schema.GroupResource{Resource: "limitranges"}
	podKind     = schema.GroupKind{Kind: "Pod"}
	claimKind   = schema.GroupKind{Kind: "PersistentVolumeClaim"}
)

// Lister lists the current objects of a resource in a namespace (the API server's
// watch caches).
type Lister interface {
	List(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error)
}

// Plugin applies and enforces LimitRanges.
type Plugin struct {
	list Lister
}

var (
	_ admission.Mutator   = (*Plugin)(nil)
	_ admission.Validator = (*Plugin)(nil)
)

// New returns the plugin reading LimitRanges through l.
func New(l Lister) *Plugin { return &Plugin{list: l} }

// handles reports whether the plugin looks at the write: creates of pods, creates and
// updates of claims (not of subresources), and nothing of an object being deleted.
func handles(a *admission.Attributes) bool {
	if a.Subresource != "" || (a.Operation != admission.Create && a.Operation != admission.Update) {
		return false
	}
	gk := a.Kind.GroupKind()
	if gk == podKind && a.Operation == admission.Update {
		return false
	}
	if gk != podKind && gk != claimKind {
		return false
	}
	if a.OldObject != nil {
		if m, err := meta.Accessor(a.OldObject); err == nil && m.GetDeletionTimestamp() != nil {
			return false
		}
	}
	return true
}

// ranges returns the LimitRanges of the write's namespace.
func (p *Plugin) ranges(ctx context.Context, a *admission.Attributes) ([]*corev1.LimitRange, error) {
	objs, err := p.list.List(ctx, limitRanges, a.Namespace)
	if err != nil {
		return nil, admission.NewForbidden(a, fmt.Errorf("unable to %s %v at this time because there was an error enforcing limit ranges", a.Operation, a.Resource))
	}
	out := make([]*corev1.LimitRange, 0, len(objs))
	for _, o := range objs {
		if lr, ok := o.(*corev1.LimitRange); ok {
			out = append(out, lr)
		}
	}
	return out, nil
}

// Admit sets the default requests and limits of a new pod's containers.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	if !handles(a) {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return nil
	}
	lrs, err := p.ranges(ctx, a)
	if err != nil {
		return err
	}
	for _, lr := range lrs {
		applyDefaults(lr, pod)
	}
	return nil
}

// Validate refuses a pod or claim outside a LimitRange's bounds.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	if !handles(a) {
		return nil
	}
	lrs, err := p.ranges(ctx, a)
	if err != nil {
		return err
	}
	for _, lr := range lrs {
		var err error
		switch o := a.Object.(type) {
		case *corev1.Pod:
			err = CheckPod(lr, o)
		case *corev1.PersistentVolumeClaim:
			err = CheckClaim(lr, o)
		}
		if err != nil {
			return admission.NewForbidden(a, err)
		}
	}
	return nil
}

// applyDefaults merges the defaults of lr's Container items into pod.
func applyDefaults(lr *corev1.LimitRange, pod *corev1.Pod) {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		for k, v := range item.DefaultRequest {
			requests[k] = v.DeepCopy()
		}
		for k, v := range item.Default {
			limits[k] = v.DeepCopy()
		}
	}
	var notes []string
	for i := range pod.Spec.Containers {
		notes = mergeDefaults(&pod.Spec.Containers[i], requests, limits, "container", notes)
	}
	for i := range pod.Spec.InitContainers {
		notes = mergeDefaults(&pod.Spec.InitContainers[i], requests, limits, "init container", notes)
	}
	if len(notes) > 0 {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[Annotation] = "LimitRanger plugin set: " + strings.Join(notes, "; ")
	}
}

// mergeDefaults sets what c does not give of requests and limits, and appends to notes
// what it set.
func mergeDefaults(c *corev1.Container, requests, limits corev1.ResourceList, what string, notes []string) []string {
	set := func(dst *corev1.ResourceList, src corev1.ResourceList) []string {
		var names []string
		for k, v := range src {
			if _, ok := (*dst)[k]; ok {
				continue
			}
			if *dst == nil {
				*dst = corev1.ResourceList{}
			}
			(*dst)[k] = v.DeepCopy()
			names = append(names, string(k))
		}
		sort.Strings(names)
		return names
	}
	if names := set(&c.Resources.Requests, requests); len(names) > 0 {
		notes = append(notes, strings.Join(names, ", ")+fmt.Sprintf(" request for %s %s", what, c.Name))
	}
	if names := set(&c.Resources.Limits, limits); len(names) > 0 {
		notes = append(notes, strings.Join(names, ", ")+fmt.Sprintf(" limit for %s %s", what, c.Name))
	}
	return notes
}

// CheckPod returns why pod is outside lr's bounds for each container and for the
// pod's totals, or nil.
func CheckPod(lr *corev1.LimitRange, pod *corev1.Pod) error {
	var errs []error
	for _, item := range lr.Spec.Limits {
		switch item.Type {
		case corev1.LimitTypeContainer:
			for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
				for i := range cs {
					errs = append(errs, checkItem(item, cs[i].Resources.Requests, cs[i].Resources.Limits)...)
				}
			}
		case corev1.LimitTypePod:
			errs = append(errs, checkItem(item, quota.PodRequests(pod), quota.PodLimits(pod))...)
		}
	}
	return utilerrors.NewAggregate(errs)
}

// checkItem checks requests and limits against an item's min, max and ratio.
func checkItem(item corev1.LimitRangeItem, requests, limits corev1.ResourceList) []error {
	t := string(item.Type)
	var errs []error
	for _, k := range names(item.Min) {
		errs = appendErr(errs, checkMin(t, k, item.Min[k], requests, limits))
	}
	for _, k := range names(item.Max) {
		errs = appendErr(errs, checkMax(t, k, item.Max[k], requests, limits))
	}
	for _, k := range names(item.MaxLimitRequestRatio) {
		errs = appendErr(errs, checkRatio(t, k, item.MaxLimitRequestRatio[k], requests, limits))
	}
	return errs
}

// CheckClaim returns why a claim's storage request is outside lr's bounds, or nil.
func CheckClaim(lr *corev1.LimitRange, pvc *corev1.PersistentVolumeClaim) error {
	var errs []error
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypePersistentVolumeClaim {
			continue
		}
		t := string(item.Type)
		for _, k := range names(item.Min) {
			errs = appendErr(errs, checkMin(t, k, item.Min[k], pvc.Spec.Resources.Requests, nil))
		}
		for _, k := range names(item.Max) {
			errs = appendErr(errs, checkMaxRequest(t, k, item.Max[k], pvc.Spec.Resources.Requests))
		}
	}
	return utilerrors.NewAggregate(errs)
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

func names(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// values returns request, limit and bound as comparable integers: milli-units when
// all three fit, else units.
func values(req, lim, bound resource.Quantity) (int64, int64, int64) {
	r, l, b := req.Value(), lim.Value(), bound.Value()
	if r <= resource.MaxMilliValue && l <= resource.MaxMilliValue && b <= resource.MaxMilliValue {
		return req.MilliValue(), lim.MilliValue(), bound.MilliValue()
	}
	return r, l, b
}

func checkMin(t string, k corev1.ResourceName, bound resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[k]
	lim, hasLim := limits[k]
	r, l, b := values(req, lim, bound)
	switch {
	case !hasReq:
		return fmt.Errorf("minimum %s usage per %s is %s.  No request is specified", k, t, bound.String())
	case r < b:
		return fmt.Errorf("minimum %s usage per %s is %s, but request is %s", k, t, bound.String(), req.String())
	case hasLim && l < b:
		return fmt.Errorf("minimum %s usage per %s is %s, but limit is %s", k, t, bound.String(), lim.String())
	}
	return nil
}

func checkMax(t string, k corev1.ResourceName, bound resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[k]
	lim, hasLim := limits[k]
	r, l, b := values(req, lim, bound)
	switch {
	case !hasLim:
		return fmt.Errorf("maximum %s usage per %s is %s.  No limit is specified", k, t, bound.String())
	case l > b:
		return fmt.Errorf("maximum %s usage per %s is %s, but limit is %s", k, t, bound.String(), lim.String())
	case hasReq && r > b:
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", k, t, bound.String(), req.String())
	}
	return nil
}

func checkMaxRequest(t string, k corev1.ResourceName, bound resource.Quantity, requests corev1.ResourceList) error {
	req, hasReq := requests[k]
	r, _, b := values(req, resource.Quantity{}, bound)
	switch {
	case !hasReq:
		return fmt.Errorf("maximum %s usage per %s is %s.  No request is specified", k, t, bound.String())
	case r > b:
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", k, t, bound.String(), req.String())
	}
	return nil
}

func checkRatio(t string, k corev1.ResourceName, bound resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[k]
	lim, hasLim := limits[k]
	r, l, _ := values(req, lim, bound)
	if !hasReq || r == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no request is specified or request is 0", k, t, bound.String())
	}
	if !hasLim || l == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no limit is specified or limit is 0", k, t, bound.String())
	}
	ratio := float64(l) / float64(r)
	observed, allowed := ratio, float64(bound.Value())
	if bound.Value() <= resource.MaxMilliValue {
		observed, allowed = ratio*1000, float64(bound.MilliValue())
	}
	if observed > allowed {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but provided ratio is %f", k, t, bound.String(), ratio)
	}
	return nil
}
