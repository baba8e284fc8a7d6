// Package crdnaming is the CustomResourceDefinition naming controller, as upstream's
// (apiextensions-apiserver's NamingConditionController): it accepts the names a CRD
// asks for (status.acceptedNames) unless another CRD of the same group has already
// been given one of them, and says so in the NamesAccepted condition (NoConflicts, or
// PluralConflict, SingularConflict, ShortNamesConflict, KindConflict,
// ListKindConflict with the name "is already in use"); a name refused keeps what was
// accepted before. It starts the Established condition as upstream does: False,
// NotAccepted while names are refused, then Installing once they are accepted, for the
// controller that serves the resource to set True.
//
// It runs beside the API server (upstream runs it in the API server process), reading
// CRDs through an informer and writing their status subresource.
package crdnaming

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubette/kubette/internal/controller/worker"
	"github.com/kubette/kubette/internal/ownwrites"
)

// Name is the controller's name in logs.
const Name = "crd-naming"

// syncTimeout bounds one sync.
const syncTimeout = 30 * time.Second

// Controller keeps the accepted names and naming conditions of every CRD.
type Controller struct {
	client apiextensionsclient.Interface
	lister apiextensionslisters.CustomResourceDefinitionLister
	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	log    *slog.Logger
	now    func() time.Time
	// written holds the CRDs this controller wrote last, which the informer may not
	// show yet (upstream reads through a mutation cache for the same reason): without
	// it, two CRDs synced in a row could both be given one name.
	written *ownwrites.Cache[*apiextensionsv1.CustomResourceDefinition]
}

// New builds the controller on a shared informer factory of the apiextensions
// clientset; the caller starts the factory.
func New(client apiextensionsclient.Interface, f apiextensionsinformers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	if client == nil || f == nil {
		return nil, errors.New("crd naming: a client and an informer factory are required")
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		client: client,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "crd_naming_condition_controller"}),
		log: log.With("controller", Name),
		now: time.Now, written: ownwrites.New[*apiextensionsv1.CustomResourceDefinition](),
	}
	inf := f.Apiextensions().V1().CustomResourceDefinitions()
	h, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueue(obj) },
		UpdateFunc: func(_, cur any) { c.enqueue(cur) },
		// A deleted CRD frees its names for the others of its group.
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
				c.enqueueGroup(crd.Spec.Group, crd.Name)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("crd naming: event handler: %w", err)
	}
	c.lister = inf.Lister()
	c.synced = []cache.InformerSynced{h.HasSynced}
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		c.queue.Add(crd.Name)
	}
}

// enqueueGroup queues every CRD of group but skip: a change of one may settle another's
// conflict.
func (c *Controller) enqueueGroup(group, skip string) {
	all, err := c.lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, crd := range all {
		if crd.Spec.Group == group && crd.Name != skip {
			c.queue.Add(crd.Name)
		}
	}
}

// Run waits for the informer to sync, then runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, worker.Options{
		Name: Name, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log, SyncTimeout: syncTimeout,
	})
}

// Sync writes the accepted names and conditions of the CRD name when they changed.
func (c *Controller) Sync(ctx context.Context, name string) error {
	crd, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		c.written.Forget(name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get CRD %s from the cache: %w", name, err)
	}
	crd = c.written.Latest(crd.Name, crd)
	resources, kinds, err := c.namesInUse(crd)
	if err != nil {
		return err
	}
	names, accepted, established := Calculate(crd, resources, kinds)
	if equality.Semantic.DeepEqual(crd.Status.AcceptedNames, names) &&
		apihelpers.IsCRDConditionEquivalent(&accepted, apihelpers.FindCRDCondition(crd, apiextensionsv1.NamesAccepted)) &&
		apihelpers.IsCRDConditionEquivalent(&established, apihelpers.FindCRDCondition(crd, apiextensionsv1.Established)) {
		return nil
	}
	upd := crd.DeepCopy()
	upd.Status.AcceptedNames = names
	now := metav1.NewTime(c.now())
	accepted.LastTransitionTime, established.LastTransitionTime = now, now
	apihelpers.SetCRDCondition(upd, accepted)
	apihelpers.SetCRDCondition(upd, established)
	written, err := c.client.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			c.written.Forget(name)
			return nil
		}
		return fmt.Errorf("update the status of CRD %s: %w", name, err)
	}
	c.written.Remember(name, written)
	// The names this one gave up or took may settle another's conflict.
	c.enqueueGroup(crd.Spec.Group, crd.Name)
	return nil
}

// namesInUse returns the resource names (plurals, singulars, short names) and kinds
// (kinds and list kinds) the other CRDs of crd's group have been given.
func (c *Controller) namesInUse(crd *apiextensionsv1.CustomResourceDefinition) (resources, kinds map[string]bool, err error) {
	all, err := c.lister.List(labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("list CRDs: %w", err)
	}
	resources, kinds = map[string]bool{}, map[string]bool{}
	for _, o := range all {
		if o.Spec.Group != crd.Spec.Group || o.Name == crd.Name {
			continue
		}
		o = c.written.Latest(o.Name, o)
		n := o.Status.AcceptedNames
		for _, r := range append([]string{n.Plural, n.Singular}, n.ShortNames...) {
			if r != "" {
				resources[r] = true
			}
		}
		for _, k := range []string{n.Kind, n.ListKind} {
			if k != "" {
				kinds[k] = true
			}
		}
	}
	return resources, kinds, nil
}

// Calculate returns the names crd may have given what its group's other CRDs use, and
// its NamesAccepted and Established conditions (without transition times).
func Calculate(crd *apiextensionsv1.CustomResourceDefinition, resources, kinds map[string]bool) (apiextensionsv1.CustomResourceDefinitionNames, apiextensionsv1.CustomResourceDefinitionCondition, apiextensionsv1.CustomResourceDefinitionCondition) {
	want, had := crd.Spec.Names, crd.Status.AcceptedNames
	names := *had.DeepCopy()
	accepted := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionUnknown}
	refuse := func(reason string, err error) {
		accepted.Status, accepted.Reason, accepted.Message = apiextensionsv1.ConditionFalse, reason, err.Error()
	}
	if err := freeOrOurs(want.Plural, had.Plural, resources); err != nil {
		refuse("PluralConflict", err)
	} else {
		names.Plural = want.Plural
	}
	if err := freeOrOurs(want.Singular, had.Singular, resources); err != nil {
		refuse("SingularConflict", err)
	} else {
		names.Singular = want.Singular
	}
	if !equality.Semantic.DeepEqual(want.ShortNames, had.ShortNames) {
		ours := map[string]bool{}
		for _, s := range had.ShortNames {
			ours[s] = true
		}
		var errs []string
		for _, s := range want.ShortNames {
			if ours[s] {
				continue
			}
			if err := freeOrOurs(s, "", resources); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if len(errs) > 0 {
			refuse("ShortNamesConflict", aggregate(errs))
		} else {
			names.ShortNames = want.ShortNames
		}
	}
	if err := freeOrOurs(want.Kind, had.Kind, kinds); err != nil {
		refuse("KindConflict", err)
	} else {
		names.Kind = want.Kind
	}
	if err := freeOrOurs(want.ListKind, had.ListKind, kinds); err != nil {
		refuse("ListKindConflict", err)
	} else {
		names.ListKind = want.ListKind
	}
	names.Categories = want.Categories
	if accepted.Status == apiextensionsv1.ConditionUnknown {
		accepted.Status, accepted.Reason, accepted.Message = apiextensionsv1.ConditionTrue, "NoConflicts", "no conflicts found"
	}

	established := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established,
		Status: apiextensionsv1.ConditionFalse, Reason: "NotAccepted", Message: "not all names are accepted"}
	if old := apihelpers.FindCRDCondition(crd, apiextensionsv1.Established); old != nil {
		established = *old.DeepCopy()
		established.LastTransitionTime = metav1.Time{}
	}
	if established.Status != apiextensionsv1.ConditionTrue && accepted.Status == apiextensionsv1.ConditionTrue {
		established = apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established,
			Status: apiextensionsv1.ConditionFalse, Reason: "Installing", Message: "the initial names have been accepted"}
	}
	return names, accepted, established
}

// freeOrOurs is nil when want is what the CRD already has or no one else uses it.
func freeOrOurs(want, had string, used map[string]bool) error {
	if want == had || !used[want] {
		return nil
	}
	return fmt.Errorf("%q is already in use", want)
}

// aggregate joins several conflicts as upstream's error aggregate prints them.
func aggregate(errs []string) error {
	if len(errs) == 1 {
		return errors.New(errs[0])
	}
	return fmt.Errorf("[%s]", strings.Join(errs, ", "))
}
