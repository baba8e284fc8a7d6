package crdserving

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubette/kubette/internal/controller/worker"
	"github.com/kubette/kubette/internal/registry"
)

// FinalizerName is the finalizer controller's name in logs.
const FinalizerName = "crd-finalizer"

// Finalizer deletes the objects of a deleted definition, then removes its clean-up
// finalizer (registry.CustomResourceCleanupFinalizer), reporting each step in the
// Terminating condition as upstream: InstanceDeletionInProgress, then
// InstanceDeletionCompleted (or NeverEstablished when it was never served),
// InstanceDeletionFailed or InstanceDeletionCheck while objects remain.
type Finalizer struct {
	client  apiextensionsclient.Interface
	dynamic dynamic.Interface
	lister  apiextensionslisters.CustomResourceDefinitionLister
	synced  []cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]
	log     *slog.Logger
}

// NewFinalizer builds the finalizer controller; the caller starts the factory.
func NewFinalizer(client apiextensionsclient.Interface, dyn dynamic.Interface, f apiextensionsinformers.SharedInformerFactory, log *slog.Logger) (*Finalizer, error) {
	if client == nil || dyn == nil || f == nil {
		return nil, errors.New("crd finalizer: clients and an informer factory are required")
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Finalizer{
		client: client, dynamic: dyn, log: log.With("controller", FinalizerName),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "crd_finalizer"}),
	}
	inf := f.Apiextensions().V1().CustomResourceDefinitions()
	h, err := inf.Informer().AddEventHandler(enqueueByName(c.queue))
	if err != nil {
		return nil, fmt.Errorf("crd finalizer: event handler: %w", err)
	}
	c.lister = inf.Lister()
	c.synced = []cache.InformerSynced{h.HasSynced}
	return c, nil
}

// Run waits for the informer to sync, then runs workers until ctx is done.
func (c *Finalizer) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, worker.Options{
		Name: FinalizerName, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log, SyncTimeout: syncTimeout,
	})
}

// Sync finishes the deletion of the named definition when it is being deleted.
func (c *Finalizer) Sync(ctx context.Context, name string) error {
	crd, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get CRD %s from the cache: %w", name, err)
	}
	if crd.DeletionTimestamp == nil || !apihelpers.CRDHasFinalizer(crd, registry.CustomResourceCleanupFinalizer) {
		return nil
	}
	crds := c.client.ApiextensionsV1().CustomResourceDefinitions()
	crd = crd.DeepCopy()
	apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
		Reason: "InstanceDeletionInProgress", Message: "CustomResource deletion is in progress",
	})
	if crd, err = crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{}); err != nil {
		return ignoreGone(fmt.Errorf("update the status of CRD %s: %w", name, err))
	}
	var cond apiextensionsv1.CustomResourceDefinitionCondition
	var deleteErr error
	if apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
		cond, deleteErr = c.deleteInstances(ctx, crd)
	} else {
		cond = apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
			Status: apiextensionsv1.ConditionFalse, Reason: "NeverEstablished", Message: "resource was never established"}
	}
	apihelpers.SetCRDCondition(crd, cond)
	if deleteErr == nil {
		apihelpers.CRDRemoveFinalizer(crd, registry.CustomResourceCleanupFinalizer)
	}
	if _, err := crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{}); err != nil {
		return ignoreGone(fmt.Errorf("update the status of CRD %s: %w", name, err))
	}
	return deleteErr
}

// deleteInstances deletes every object of crd (a collection delete per namespace)
// and reports whether none is left.
func (c *Finalizer) deleteInstances(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (apiextensionsv1.CustomResourceDefinitionCondition, error) {
	failed := func(reason string, err error) (apiextensionsv1.CustomResourceDefinitionCondition, error) {
		return apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
			Status: apiextensionsv1.ConditionTrue, Reason: reason, Message: err.Error()}, err
	}
	version := ""
	for _, v := range crd.Spec.Versions {
		if v.Served && (version == "" || v.Storage) {
			version = v.Name
		}
	}
	if version == "" {
		return apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
			Status: apiextensionsv1.ConditionFalse, Reason: "InstanceDeletionCompleted", Message: "removed all instances"}, nil
	}
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Status.AcceptedNames.Plural}
	res := c.dynamic.Resource(gvr)
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return failed("InstanceDeletionFailed", fmt.Errorf("could not list instances: %w", err))
	}
	namespaces := map[string]bool{}
	for _, item := range list.Items {
		namespaces[item.GetNamespace()] = true
	}
	var errs []error
	for ns := range namespaces {
		var err error
		if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
			err = res.Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		} else {
			err = res.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("could not issue all deletes: %w", err))
		}
	}
	if len(errs) > 0 {
		return failed("InstanceDeletionFailed", errors.Join(errs...))
	}
	left, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return failed("InstanceDeletionCheck", fmt.Errorf("could not confirm zero CustomResources remaining: %w", err))
	}
	if n := len(left.Items); n > 0 {
		// Objects with finalizers of their own: try again once they are gone.
		return failed("InstanceDeletionCheck", fmt.Errorf("could not confirm zero CustomResources remaining: %d left", n))
	}
	return apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
		Status: apiextensionsv1.ConditionFalse, Reason: "InstanceDeletionCompleted", Message: "removed all instances"}, nil
}

// ignoreGone drops the error of a write to a definition that no longer exists.
func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
