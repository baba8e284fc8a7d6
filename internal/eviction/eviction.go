// Package eviction serves the pods/eviction subresource (policy/v1 Eviction, and
// policy/v1beta1 bodies as upstream still accepts them) as an API server action, with
// the semantics of upstream's pkg/registry/core/pod/storage/eviction.go: a pod that is
// terminal, pending or already being deleted is deleted at once; otherwise the
// PodDisruptionBudget matching it must allow one more disruption, which is taken from
// its status (disruptionsAllowed decremented, the pod put in disruptedPods) before the
// pod gets the DisruptionTarget condition and is deleted with the request's options.
// A budget that forbids it answers 429 with upstream's message and DisruptionBudget
// cause, which `kubectl drain` retries.
package eviction

import (
	"context"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"

	"github.com/kubette/kubette/internal/apiserver"
)

// MaxDisruptedPods is the most pods a budget's status.disruptedPods may hold before
// evictions under it are refused: that many evictions were granted and the disruption
// controller has not yet seen them (upstream's MaxDisruptedPodSize).
const MaxDisruptedPods = 2000

// Condition reason and message the pod gets before it is deleted, as upstream.
const (
	ReasonEvictionByEvictionAPI = "EvictionByEvictionAPI"
	messageEvicting             = "Eviction API: evicting"
)

// TooManyRequestsMessage is the message of the 429 a budget's refusal answers.
const TooManyRequestsMessage = "Cannot evict pod as it would violate the pod's disruption budget."

// Kind is the body kind served; KindV1beta1 the older one also accepted.
var (
	Kind        = policyv1.SchemeGroupVersion.WithKind("Eviction")
	KindV1beta1 = policyv1beta1.SchemeGroupVersion.WithKind("Eviction")
)

// retryBackoff is how conflicts with other writers of the pod or budget are retried
// (upstream's EvictionsRetry: 20 tries half a second apart).
var retryBackoff = wait.Backoff{Steps: 20, Duration: 500 * time.Millisecond, Factor: 1.0, Jitter: 0.1}

// Evictions evicts pods through the API server's own client.
type Evictions struct {
	// Client is the API server's loopback client: pods and budgets are read live and
	// written through it.
	Client kubernetes.Interface
	// Now is the clock of disruptedPods and conditions (time.Now when nil).
	Now func() time.Time
	// Backoff overrides the conflict retries (tests); zero means upstream's.
	Backoff wait.Backoff
}

// Actions returns the pods/eviction action.
func (e *Evictions) Actions() map[apiserver.ActionKey]apiserver.Action {
	return map[apiserver.ActionKey]apiserver.Action{
		{Resource: "pods", Subresource: "eviction"}: {
			New:  func() runtime.Object { return &policyv1.Eviction{} },
			Kind: Kind,
			Also: map[schema.GroupVersionKind]func() runtime.Object{
				KindV1beta1: func() runtime.Object { return &policyv1beta1.Eviction{} },
			},
			Do: e.Create,
		},
	}
}

func (e *Evictions) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Evictions) backoff() wait.Backoff {
	if e.Backoff.Steps > 0 {
		return e.Backoff
	}
	return retryBackoff
}

// request is what an Eviction body says, whatever its version.
type request struct {
	meta metav1.ObjectMeta
	opts *metav1.DeleteOptions
}

func requestOf(obj runtime.Object) (request, error) {
	switch ev := obj.(type) {
	case *policyv1.Eviction:
		return request{meta: ev.ObjectMeta, opts: ev.DeleteOptions}, nil
	case *policyv1beta1.Eviction:
		return request{meta: ev.ObjectMeta, opts: ev.DeleteOptions}, nil
	}
	return request{}, apierrors.NewBadRequest(fmt.Sprintf("not a Eviction object: %T", obj))
}

// Create evicts the pod namespace/name as the Eviction obj asks.
func (e *Evictions) Create(ctx context.Context, namespace, name string, obj runtime.Object) (runtime.Object, error) {
	ev, err := requestOf(obj)
	if err != nil {
		return nil, err
	}
	if ev.meta.Namespace != "" && ev.meta.Namespace != namespace {
		return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if name != ev.meta.Name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	if ev.opts != nil && ev.opts.IgnoreStoreReadErrorWithClusterBreakingPotential != nil && *ev.opts.IgnoreStoreReadErrorWithClusterBreakingPotential {
		return nil, apierrors.NewInvalid(Kind.GroupKind(), name, field.ErrorList{field.Invalid(
			field.NewPath("deleteOptions", "ignoreStoreReadErrorWithClusterBreakingPotential"), true,
			"can not be set for pod eviction, try after removing the option")})
	}
	opts, err := propagateDryRun(ev.opts, apiserver.ActionOptionsFrom(ctx).DryRun)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	pods := e.Client.CoreV1().Pods(namespace)

	// A pod that is done, not yet running or already going is deleted at once: its
	// disruption has happened or does not count. Conflicts (the pod changed between the
	// read and the delete) are retried unless the caller set the resourceVersion.
	shouldRetry := apierrors.IsConflict
	if !rvUnset(opts) {
		shouldRetry = func(error) bool { return false }
	}
	var pod *corev1.Pod
	deleted := false
	err = retry.OnError(e.backoff(), shouldRetry, func() error {
		pod, err = pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !canIgnoreBudget(pod) {
			return nil
		}
		del := opts
		if enforceResourceVersion(pod) && rvUnset(opts) {
			del = withResourceVersion(opts, pod.ResourceVersion)
		}
		if err := e.markAndDelete(ctx, pod.Namespace, name, del); err != nil {
			return err
		}
		deleted = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	if deleted {
		return &metav1.Status{Status: metav1.StatusSuccess}, nil
	}

	budgets, err := e.budgetsFor(ctx, pod)
	if err != nil {
		return nil, err
	}
	if len(budgets) > 1 {
		return &metav1.Status{Status: metav1.StatusFailure, Code: 500,
			Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}, nil
	}
	// pinned: the delete must fail if the pod changed since it was judged (an unready
	// pod deleted without taking from the budget must not have become ready).
	pinned := false
	var pdbName string
	if len(budgets) == 1 {
		pdb := &budgets[0]
		pdbName = pdb.Name
		switch {
		case isReady(pod):
		case pdb.Spec.UnhealthyPodEvictionPolicy != nil && *pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow:
			pinned = true
		case pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0:
			// IfHealthyBudget (the default): an unready pod may go while the budget is met.
			pinned = true
		}
		if !pinned {
			if err := e.takeFromBudget(ctx, pod, pdb, isDryRun(opts.DryRun)); err != nil {
				return nil, err
			}
		}
	}
	del := opts
	if pinned {
		del = withResourceVersion(opts, pod.ResourceVersion)
	}
	if err := e.markAndDelete(ctx, pod.Namespace, name, del); err != nil {
		if apierrors.IsConflict(err) && pinned && rvUnset(opts) {
			// The pod changed since it was judged: the client retries the eviction.
			return nil, stillProcessing(pdbName)
		}
		return nil, err
	}
	return &metav1.Status{Status: metav1.StatusSuccess}, nil
}

// takeFromBudget decrements the budget's disruptionsAllowed and records the pod in its
// disruptedPods (not on a dry run), reading the budget again after a conflict.
func (e *Evictions) takeFromBudget(ctx context.Context, pod *corev1.Pod, pdb *policyv1.PodDisruptionBudget, dryRun bool) error {
	client := e.Client.PolicyV1().PodDisruptionBudgets(pod.Namespace)
	refresh := false
	return retry.RetryOnConflict(e.backoff(), func() error {
		if refresh {
			fresh, err := client.Get(ctx, pdb.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			pdb = fresh
		}
		refresh = true
		if err := checkBudget(pdb); err != nil {
			return err
		}
		next := pdb.DeepCopy()
		next.Status.DisruptionsAllowed--
		if next.Status.DisruptionsAllowed == 0 {
			pdbhelper.UpdateDisruptionAllowedCondition(next)
		}
		if dryRun {
			return nil
		}
		if next.Status.DisruptedPods == nil {
			next.Status.DisruptedPods = map[string]metav1.Time{}
		}
		// The disruption controller does not count the pod as healthy while it is here,
		// and drops it when the pod is not deleted within its timeout.
		next.Status.DisruptedPods[pod.Name] = metav1.NewTime(e.now())
		_, err := client.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		return err
	})
}

// checkBudget refuses an eviction the budget's status does not allow.
func checkBudget(pdb *policyv1.PodDisruptionBudget) error {
	gr := schema.GroupResource{Group: policyv1.GroupName, Resource: "poddisruptionbudget"}
	if pdb.Status.ObservedGeneration < pdb.Generation {
		return stillProcessing(pdb.Name)
	}
	if pdb.Status.DisruptionsAllowed < 0 {
		return apierrors.NewForbidden(gr, pdb.Name, fmt.Errorf("pdb disruptions allowed is negative"))
	}
	if len(pdb.Status.DisruptedPods) > MaxDisruptedPods {
		return apierrors.NewForbidden(gr, pdb.Name, fmt.Errorf("DisruptedPods map too big - too many evictions not confirmed by PDB controller"))
	}
	if pdb.Status.DisruptionsAllowed == 0 {
		err := apierrors.NewTooManyRequests(TooManyRequestsMessage, 0)
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
			Type:    policyv1.DisruptionBudgetCause,
			Message: fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy),
		})
		return err
	}
	return nil
}

// stillProcessing is the 429 of a budget whose status is behind its spec, or of a pod
// that changed while it was evicted.
func stillProcessing(name string) error {
	err := apierrors.NewTooManyRequests(TooManyRequestsMessage, 10)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    policyv1.DisruptionBudgetCause,
		Message: fmt.Sprintf("The disruption budget %s is still being processed by the server.", name),
	})
	return err
}

// markAndDelete gives the pod the DisruptionTarget condition (not on a dry run) and
// deletes it with opts. The condition goes on the latest pod, which must still meet
// opts' preconditions; the delete's resourceVersion precondition then follows that
// write, which this eviction made itself.
func (e *Evictions) markAndDelete(ctx context.Context, namespace, name string, opts *metav1.DeleteOptions) error {
	pods := e.Client.CoreV1().Pods(namespace)
	if !isDryRun(opts.DryRun) {
		// Only the condition's write is retried on a conflict: a pod that no longer
		// meets the preconditions fails the eviction, as upstream's guaranteed update.
		writeConflict := false
		err := retry.OnError(e.backoff(), func(error) bool { return writeConflict }, func() error {
			writeConflict = false
			pod, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := checkPreconditions(pod, opts.Preconditions); err != nil {
				return err
			}
			rv := pod.ResourceVersion
			if setDisruptionTarget(&pod.Status, e.now()) {
				updated, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
				if err != nil {
					writeConflict = apierrors.IsConflict(err)
					return err
				}
				rv = updated.ResourceVersion
			}
			if !rvUnset(opts) {
				opts = withResourceVersion(opts, rv)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return pods.Delete(ctx, name, *opts)
}

// checkPreconditions is the conflict a delete with p would meet on pod.
func checkPreconditions(pod *corev1.Pod, p *metav1.Preconditions) error {
	if p == nil {
		return nil
	}
	gr := schema.GroupResource{Resource: "Pod"}
	if p.UID != nil && *p.UID != "" && *p.UID != pod.UID {
		return apierrors.NewConflict(gr, pod.Name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *p.UID, pod.UID))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != "" && *p.ResourceVersion != pod.ResourceVersion {
		return apierrors.NewConflict(gr, pod.Name, fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *p.ResourceVersion, pod.ResourceVersion))
	}
	return nil
}

// setDisruptionTarget sets the DisruptionTarget condition (True, EvictionByEvictionAPI)
// as upstream's UpdatePodCondition does: the transition time moves only with the
// status. It reports whether anything changed.
func setDisruptionTarget(st *corev1.PodStatus, now time.Time) bool {
	want := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: ReasonEvictionByEvictionAPI, Message: messageEvicting, LastTransitionTime: metav1.NewTime(now)}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != corev1.DisruptionTarget {
			continue
		}
		if c.Status == want.Status {
			want.LastTransitionTime = c.LastTransitionTime
		}
		want.LastProbeTime = c.LastProbeTime
		if reflect.DeepEqual(*c, want) {
			return false
		}
		*c = want
		return true
	}
	st.Conditions = append(st.Conditions, want)
	return true
}

// budgetsFor returns the budgets of the pod's namespace whose selector matches it. A
// budget with an empty selector matches nothing here, as upstream's eviction.
func (e *Evictions) budgetsFor(ctx context.Context, pod *corev1.Pod) ([]policyv1.PodDisruptionBudget, error) {
	list, err := e.Client.PolicyV1().PodDisruptionBudgets(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []policyv1.PodDisruptionBudget
	for _, pdb := range list.Items {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, pdb)
	}
	return out, nil
}

// propagateDryRun merges the request's dryRun into the body's delete options; the two
// must agree when both are given.
func propagateDryRun(opts *metav1.DeleteOptions, dryRun []string) (*metav1.DeleteOptions, error) {
	if opts == nil {
		return &metav1.DeleteOptions{DryRun: dryRun}, nil
	}
	opts = opts.DeepCopy()
	switch {
	case len(opts.DryRun) == 0:
		opts.DryRun = dryRun
	case len(dryRun) == 0:
	case !reflect.DeepEqual(opts.DryRun, dryRun):
		return nil, fmt.Errorf("Non-matching dry-run options in request and content: %v and %v", dryRun, opts.DryRun)
	}
	return opts, nil
}

func isDryRun(dryRun []string) bool { return len(dryRun) > 0 }

func rvUnset(opts *metav1.DeleteOptions) bool {
	return opts.Preconditions == nil || opts.Preconditions.ResourceVersion == nil
}

func withResourceVersion(opts *metav1.DeleteOptions, rv string) *metav1.DeleteOptions {
	o := opts.DeepCopy()
	if o.Preconditions == nil {
		o.Preconditions = &metav1.Preconditions{}
	}
	o.Preconditions.ResourceVersion = &rv
	return o
}

// canIgnoreBudget: a pod that finished, has not started or is being deleted already
// disrupts nothing more by going.
func canIgnoreBudget(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed, corev1.PodPending:
		return true
	}
	return pod.DeletionTimestamp != nil
}

// enforceResourceVersion: a pending pod deleted without consulting a budget must not
// have become ready meanwhile; terminal and deleting pods need no such guard.
func enforceResourceVersion(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return false
	}
	return pod.DeletionTimestamp == nil
}

// isReady is the disruption budgets' idea of a healthy pod: its Ready condition is True.
func isReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
