// Package admissionpolicystatus is the ValidatingAdmissionPolicy status controller, as
// upstream's (kube-controller-manager's validatingadmissionpolicy-status-controller):
// for each policy whose status does not describe its current generation, it type
// checks the validations and messageExpressions against the schemas of the kinds the
// policy's resource rules name (read from the API server's OpenAPI v3 documents) and
// of its paramKind, and writes the warnings and the observed generation to the
// status subresource.
package admissionpolicystatus

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/kubernetes"
	listers "k8s.io/client-go/listers/admissionregistration/v1"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubette/kubette/internal/admissioncel"
	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/worker"
)

// Name is the controller's name, as upstream's.
const Name = "validatingadmissionpolicy-status-controller"

// maxTypesToCheck is upstream's bound on the kinds one policy is checked against.
const maxTypesToCheck = 10

// Controller writes the status of ValidatingAdmissionPolicies.
type Controller struct {
	client  kubernetes.Interface
	lister  listers.ValidatingAdmissionPolicyLister
	synced  cache.InformerSynced
	mapper  *restmapper.DeferredDiscoveryRESTMapper
	schemas resolver.SchemaResolver
	queue   workqueue.TypedRateLimitingInterface[string]
	log     *slog.Logger
}

var _ controller.Runner = (*Controller)(nil)

// New builds the controller on the shared informers, the RESTMapper and discovery.
func New(d controller.Deps) (controller.Runner, error) {
	if d.Client == nil || d.Informers == nil || d.Discovery == nil || d.RESTMapper == nil {
		return nil, fmt.Errorf("%s needs a client, informers, discovery and a RESTMapper", Name)
	}
	inf := d.Informers.Admissionregistration().V1().ValidatingAdmissionPolicies()
	c := &Controller{
		client: d.Client, lister: inf.Lister(), synced: inf.Informer().HasSynced, mapper: d.RESTMapper,
		schemas: &resolver.ClientDiscoveryResolver{Discovery: d.Discovery},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name}),
		log: d.Logger.With("controller", Name),
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return c, nil
}

// Run runs the workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, worker.Options{Name: Name, Workers: workers, Synced: []cache.InformerSynced{c.synced},
		Sync: c.sync, SyncTimeout: 30 * time.Second, Log: c.log})
}

func (c *Controller) sync(ctx context.Context, key string) error {
	p, err := c.lister.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if p.Status.TypeChecking != nil && p.Status.ObservedGeneration == p.Generation {
		return nil
	}
	p = p.DeepCopy()
	p.Status.ObservedGeneration = p.Generation
	p.Status.TypeChecking = &admissionregistrationv1.TypeChecking{ExpressionWarnings: c.check(p)}
	_, err = c.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or changed: the informer brings the new version
	}
	return err
}

// check returns the type checking warnings of a policy's validations and
// messageExpressions, in upstream's form: per expression, one line per kind it
// fails for, "<kind>: <issues>".
func (c *Controller) check(p *admissionregistrationv1.ValidatingAdmissionPolicy) []admissionregistrationv1.ExpressionWarning {
	kinds := c.kindsToCheck(p)
	if len(kinds) == 0 {
		return nil
	}
	types := make([]*apiservercel.DeclType, len(kinds))
	for i, gvk := range kinds {
		types[i] = c.declType(gvk)
	}
	var params *apiservercel.DeclType
	if k := p.Spec.ParamKind; k != nil {
		if gv, err := schema.ParseGroupVersion(k.APIVersion); err == nil {
			params = c.declType(gv.WithKind(k.Kind))
		}
	}
	vars := make([]admissioncel.NamedExpression, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		vars[i] = admissioncel.NamedExpression{Name: v.Name, Expression: v.Expression}
	}
	checkOne := func(expr string) string {
		var lines []string
		for i, gvk := range kinds {
			if types[i] == nil {
				continue // no schema: nothing to check against, as upstream
			}
			err := admissioncel.TypeCheck(expr, vars, admissioncel.CheckTypes{Object: types[i], Params: params, HasParams: p.Spec.ParamKind != nil})
			if err != nil {
				lines = append(lines, fmt.Sprintf("%v: %s\n", gvk, err))
			}
		}
		return strings.Join(lines, "\n")
	}
	var warnings []admissionregistrationv1.ExpressionWarning
	path := field.NewPath("spec", "validations")
	for i, v := range p.Spec.Validations {
		if w := checkOne(v.Expression); w != "" {
			warnings = append(warnings, admissionregistrationv1.ExpressionWarning{FieldRef: path.Index(i).Child("expression").String(), Warning: w})
		}
		if v.MessageExpression == "" {
			continue
		}
		if w := checkOne(v.MessageExpression); w != "" {
			warnings = append(warnings, admissionregistrationv1.ExpressionWarning{FieldRef: path.Index(i).Child("messageExpression").String(), Warning: w})
		}
	}
	return warnings
}

// declType is the CEL type of a kind's schema, nil when the schema is unknown.
func (c *Controller) declType(gvk schema.GroupVersionKind) *apiservercel.DeclType {
	s, err := c.schemas.ResolveSchema(gvk)
	if err != nil {
		return nil
	}
	return openapi.SchemaDeclType(s, true).MaybeAssignTypeName(fmt.Sprintf("%s%d", gvk.Kind, time.Now().UnixNano()))
}

// kindsToCheck lists the kinds the policy's resource rules name without wildcards
// (sorted, at most maxTypesToCheck), as upstream's type checker.
func (c *Controller) kindsToCheck(p *admissionregistrationv1.ValidatingAdmissionPolicy) []schema.GroupVersionKind {
	if p.Spec.MatchConstraints == nil {
		return nil
	}
	out := sets.New[schema.GroupVersionKind]()
	refreshed := false
	for _, r := range p.Spec.MatchConstraints.ResourceRules {
		groups, versions, resources := concrete(r.APIGroups), concrete(r.APIVersions), concreteResources(r.Resources)
		for _, g := range groups {
			for _, v := range versions {
				for _, res := range resources {
					gvr := schema.GroupVersionResource{Group: g, Version: v, Resource: res}
					kinds, err := c.mapper.KindsFor(gvr)
					if err != nil && !refreshed {
						c.mapper.Reset()
						refreshed = true
						kinds, err = c.mapper.KindsFor(gvr)
					}
					if err != nil {
						continue
					}
					for _, k := range kinds {
						if !k.Empty() {
							out.Insert(k)
						}
						if out.Len() == maxTypesToCheck {
							return sorted(out)
						}
					}
				}
			}
		}
	}
	return sorted(out)
}

func concrete(list []string) []string {
	var out []string
	for _, s := range list {
		if s != "*" {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// concreteResources are the resources without subresources and wildcards.
func concreteResources(list []string) []string {
	var out []string
	for _, s := range list {
		if s != "*" && !strings.Contains(s, "/") {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func sorted(s sets.Set[schema.GroupVersionKind]) []schema.GroupVersionKind {
	out := s.UnsortedList()
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
