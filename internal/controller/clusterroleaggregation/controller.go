// Package clusterroleaggregation is the ClusterRole aggregation controller: the rules
// of a ClusterRole with an aggregationRule are the union of the rules of the
// ClusterRoles its clusterRoleSelectors match, kept up to date as those change. This
// is how the default admin, edit and view roles get their rules (from the
// system:aggregate-to-* roles and any role a user labels to join them).
//
// It follows upstream pkg/controller/clusterroleaggregation: any ClusterRole change
// queues every aggregating ClusterRole; a sync lists the ClusterRoles each selector
// matches, in name order, appends each rule not already present (by equality), and
// writes the rules when they differ from the stored ones.
package clusterroleaggregation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/worker"
)

// Name is the controller's name in the controller manager's registry (upstream's
// --controllers name).
const Name = "clusterrole-aggregation"

// ClientName is the name upstream gives the controller's client and ServiceAccount.
const ClientName = "clusterrole-aggregation-controller"

// syncTimeout bounds one sync.
const syncTimeout = time.Minute

// Controller keeps the rules of aggregated ClusterRoles.
type Controller struct {
	client kubernetes.Interface
	lister rbaclisters.ClusterRoleLister
	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	log    *slog.Logger
}

var _ controller.Runner = (*Controller)(nil)

// New builds the controller and registers its ClusterRole informer.
func New(d controller.Deps) (*Controller, error) {
	if d.Client == nil || d.Informers == nil {
		return nil, errors.New("clusterrole aggregation: Client and Informers are required")
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		client: d.Client,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "clusterrole_aggregation"}),
		log: log.With("controller", Name),
	}
	inf := d.Informers.Rbac().V1().ClusterRoles()
	h, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.queueAggregated() },
		UpdateFunc: func(any, any) { c.queueAggregated() },
		DeleteFunc: func(any) { c.queueAggregated() },
	})
	if err != nil {
		return nil, fmt.Errorf("clusterrole aggregation: event handler: %w", err)
	}
	c.lister = inf.Lister()
	c.synced = []cache.InformerSynced{h.HasSynced}
	return c, nil
}

// queueAggregated queues every ClusterRole that aggregates others: any change may
// change what one of them selects.
func (c *Controller) queueAggregated() {
	all, err := c.lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, cr := range all {
		if cr.AggregationRule != nil {
			c.queue.Add(cr.Name)
		}
	}
}

// Run waits for the informer to sync, then runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, worker.Options{
		Name: Name, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log, SyncTimeout: syncTimeout,
	})
}

// Sync sets the rules of the aggregating ClusterRole name to the union of the rules of
// the ClusterRoles its selectors match (itself excluded).
func (c *Controller) Sync(ctx context.Context, name string) error {
	cr, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get cluster role %s from the cache: %w", name, err)
	}
	if cr.AggregationRule == nil {
		return nil
	}
	rules, err := c.aggregate(cr)
	if err != nil {
		return err
	}
	if equalRules(cr.Rules, rules) {
		return nil
	}
	upd := cr.DeepCopy()
	upd.Rules = rules
	if _, err := c.client.RbacV1().ClusterRoles().Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update the rules of cluster role %s: %w", name, err)
	}
	return nil
}

// aggregate is the union of the rules of the ClusterRoles cr selects, each rule once,
// in the order of the selectors and then of the roles' names.
func (c *Controller) aggregate(cr *rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	seen := map[string]bool{}
	for i := range cr.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&cr.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			// An invalid selector selects nothing; validation refuses it anyway.
			continue
		}
		matched, err := c.lister.List(sel)
		if err != nil {
			return nil, fmt.Errorf("list cluster roles: %w", err)
		}
		sort.Slice(matched, func(a, b int) bool { return matched[a].Name < matched[b].Name })
		for _, m := range matched {
			if m.Name == cr.Name || seen[m.Name] {
				continue
			}
			seen[m.Name] = true
			for _, r := range m.Rules {
				if !containsRule(rules, r) {
					rules = append(rules, *r.DeepCopy())
				}
			}
		}
	}
	return rules, nil
}

func containsRule(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	for _, x := range rules {
		if equalRule(x, r) {
			return true
		}
	}
	return false
}

// equalRule compares two rules field by field, a nil list equal to an empty one.
func equalRule(a, b rbacv1.PolicyRule) bool {
	eq := func(x, y []string) bool { return len(x) == len(y) && (len(x) == 0 || reflect.DeepEqual(x, y)) }
	return eq(a.Verbs, b.Verbs) && eq(a.APIGroups, b.APIGroups) && eq(a.Resources, b.Resources) &&
		eq(a.ResourceNames, b.ResourceNames) && eq(a.NonResourceURLs, b.NonResourceURLs)
}

func equalRules(a, b []rbacv1.PolicyRule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equalRule(a[i], b[i]) {
			return false
		}
	}
	return true
}
