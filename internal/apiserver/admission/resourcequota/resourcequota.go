// Package resourcequota is the ResourceQuota admission plugin, as upstream's
// (k8s.io/apiserver/pkg/admission/plugin/resourcequota), last in the chain: a write
// that would take a namespace's usage of a quota over its hard limit is refused with
// upstream's 403 ("exceeded quota: NAME, requested: pods=1, used: pods=1, limited:
// pods=1"), and an admitted one is charged to every quota that limits it by writing the
// quota's status.used through the API with the version read (compare-and-swap), so that
// two concurrent creates can never both take the last unit. The quota controller gives
// back what deleted objects used.
package resourcequota

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/ownwrites"
	"github.com/kubette/kubette/internal/quota"
)

// Name is the plugin's name, as upstream's.
const Name = "ResourceQuota"

// maxConflicts bounds the retries of a quota's status update that lost a race.
const maxConflicts = 50

var resourceQuotas = schema.GroupResource{Resource: "resourcequotas"}

// liveTTL is how long a live lookup of a namespace's quotas stands in for the watch
// cache when the cache shows none, and liveEntries how many namespaces are remembered
// (upstream's 30 s and 100).
const (
	liveTTL     = 30 * time.Second
	liveEntries = 100
)

// Lister lists the current objects of a resource in a namespace: List from the API
// server's watch caches, ListLive from storage.
type Lister interface {
	List(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error)
	ListLive(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error)
}

// liveEntry is a live lookup of one namespace's quotas.
type liveEntry struct {
	quotas  []runtime.Object
	expires time.Time
}

// Plugin enforces and charges ResourceQuotas.
type Plugin struct {
	list   Lister
	quotas func(namespace string) typedcorev1.ResourceQuotaInterface
	now    func() time.Time

	// mu serializes the charges of one API server (upstream's evaluator works one
	// namespace at a time too); written remembers the quotas it wrote last, which
	// the watch cache may not show yet.
	mu      sync.Mutex
	written *ownwrites.Cache[*corev1.ResourceQuota]

	// liveMu guards live, the live lookups of namespaces whose quotas the watch
	// cache did not show.
	liveMu sync.Mutex
	live   map[string]liveEntry
}

var _ admission.Validator = (*Plugin)(nil)

// New returns the plugin reading quotas through l and writing their status through
// client (the API server's loopback client).
func New(l Lister, client typedcorev1.ResourceQuotasGetter) *Plugin {
	return &Plugin{list: l, quotas: client.ResourceQuotas, now: time.Now,
		written: ownwrites.New[*corev1.ResourceQuota](), live: map[string]liveEntry{}}
}

// handles reports whether the write can change what e's resource uses: creates, and
// updates of services and claims (a service's type, a claim's size).
func handles(e quota.Evaluator, a *admission.Attributes) bool {
	if a.Subresource != "" || a.Namespace == "" {
		return false
	}
	switch a.Operation {
	case admission.Create:
		return true
	case admission.Update:
		switch e.(type) {
		case quota.Services, quota.Claims:
			return true
		}
	}
	return false
}

// Validate refuses a write over a quota and charges an admitted one.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	e := quota.For(a.Resource.GroupResource())
	if !handles(e, a) {
		return nil
	}
	objs, err := p.quotasOf(ctx, a.Namespace)
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("error looking up quotas: %w", err))
	}
	if len(objs) == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	quotas := make([]*corev1.ResourceQuota, 0, len(objs))
	for _, o := range objs {
		if q, ok := o.(*corev1.ResourceQuota); ok {
			quotas = append(quotas, p.written.Latest(q.Namespace+"/"+q.Name, q)) // never changed in place: check copies
		}
	}
	delta, err := p.delta(e, a)
	if err != nil || len(delta) == 0 {
		return err
	}
	// Check every quota first: a refusal by one charges none.
	var charges []*corev1.ResourceQuota
	for _, q := range quotas {
		charged, err := check(e, q, a, delta)
		if err != nil {
			return err
		}
		if charged != nil {
			charges = append(charges, charged)
		}
	}
	if a.DryRun {
		return nil
	}
	for _, q := range charges {
		if err := p.charge(ctx, e, q, a, delta); err != nil {
			return err
		}
	}
	return nil
}

// quotasOf returns the quotas of namespace ns. When the watch cache shows none it may
// not have seen a quota created a moment ago, so, as upstream, the plugin looks in
// storage and keeps what it found for liveTTL (found quotas are then brought up to date
// by the plugin's own last writes and the compare-and-swap of their charge).
func (p *Plugin) quotasOf(ctx context.Context, ns string) ([]runtime.Object, error) {
	objs, err := p.list.List(ctx, resourceQuotas, ns)
	if err != nil || len(objs) > 0 {
		return objs, err
	}
	now := p.now()
	p.liveMu.Lock()
	e, ok := p.live[ns]
	p.liveMu.Unlock()
	if ok && now.Before(e.expires) {
		return e.quotas, nil
	}
	objs, err = p.list.ListLive(ctx, resourceQuotas, ns)
	if err != nil {
		return nil, err
	}
	p.liveMu.Lock()
	defer p.liveMu.Unlock()
	if len(p.live) >= liveEntries {
		for k, old := range p.live {
			if !now.Before(old.expires) || len(p.live) >= liveEntries {
				delete(p.live, k)
			}
		}
	}
	p.live[ns] = liveEntry{quotas: objs, expires: now.Add(liveTTL)}
	return objs, nil
}

// delta is what the write adds to the namespace's usage: the new object's usage, less
// the old one's on an update; no zero entries.
func (p *Plugin) delta(e quota.Evaluator, a *admission.Attributes) (corev1.ResourceList, error) {
	now := p.now()
	usage, err := e.Usage(a.Object, now)
	if err != nil {
		return nil, admission.NewForbidden(a, err)
	}
	if neg := quota.Negative(usage); len(neg) > 0 {
		return nil, admission.NewForbidden(a, fmt.Errorf("quota usage is negative for resource(s): %s", joinNames(neg)))
	}
	if a.Operation == admission.Update {
		if a.OldObject == nil {
			return nil, admission.NewForbidden(a, fmt.Errorf("unable to get previous usage since prior version of object was not found"))
		}
		if m, err := meta.Accessor(a.OldObject); err == nil && m.GetResourceVersion() != "" {
			prev, err := e.Usage(a.OldObject, now)
			if err != nil {
				return nil, admission.NewForbidden(a, err)
			}
			usage = quota.SubtractNonNegative(usage, prev)
		}
	}
	return quota.RemoveZeros(usage), nil
}

// check returns q with the write's usage added, nil when q does not limit the write, or
// the 403 of a write q refuses.
func check(e quota.Evaluator, q *corev1.ResourceQuota, a *admission.Attributes, delta corev1.ResourceList) (*corev1.ResourceQuota, error) {
	match, err := quota.Matches(e, q, a.Object)
	if err != nil {
		return nil, admission.NewForbidden(a, fmt.Errorf("error matching scopes of quota %s, err: %w", q.Name, err))
	}
	if !match {
		return nil, nil
	}
	hard := quota.Names(q.Status.Hard)
	limited := e.MatchingResources(hard)
	if err := e.Constraints(limited, a.Object); err != nil {
		return nil, admission.NewForbidden(a, fmt.Errorf("failed quota: %s: %w", q.Name, err))
	}
	for _, n := range limited {
		if _, ok := q.Status.Used[n]; !ok {
			return nil, admission.NewForbidden(a, fmt.Errorf("status unknown for quota: %s, resources: %s", q.Name, joinNames(limited)))
		}
	}
	requested := quota.Mask(delta, hard)
	if len(requested) == 0 {
		return nil, nil
	}
	used := quota.Add(q.Status.Used, requested)
	if over := quota.Exceeded(quota.Mask(used, quota.Names(requested)), q.Status.Hard); len(over) > 0 {
		return nil, admission.NewForbidden(a, fmt.Errorf("exceeded quota: %s, requested: %s, used: %s, limited: %s",
			q.Name, quota.String(quota.Mask(requested, over)), quota.String(quota.Mask(q.Status.Used, over)), quota.String(quota.Mask(q.Status.Hard, over))))
	}
	out := q.DeepCopy()
	out.Status.Used = used
	return out, nil
}

// charge writes q's new usage with the version it was computed from; when another
// write got there first it reads the quota again and checks the write against it.
func (p *Plugin) charge(ctx context.Context, e quota.Evaluator, q *corev1.ResourceQuota, a *admission.Attributes, delta corev1.ResourceList) error {
	for range maxConflicts {
		written, err := p.quotas(q.Namespace).UpdateStatus(ctx, q, metav1.UpdateOptions{})
		if err == nil {
			p.written.Remember(q.Namespace+"/"+q.Name, written)
			return nil
		}
		if apierrors.IsNotFound(err) {
			return nil // the quota is gone: nothing to charge
		}
		if !apierrors.IsConflict(err) {
			return apierrors.NewInternalError(fmt.Errorf("update the status of quota %s: %w", q.Name, err))
		}
		cur, err := p.quotas(q.Namespace).Get(ctx, q.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("read quota %s: %w", q.Name, err))
		}
		if q, err = check(e, cur, a, delta); err != nil || q == nil {
			return err
		}
	}
	return apierrors.NewInternalError(fmt.Errorf("quota %s changed %d times while it was being charged", q.Name, maxConflicts))
}

func joinNames(names []corev1.ResourceName) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}
