// Package crdserving serves the resources of CustomResourceDefinitions and cleans them
// up, as the controllers upstream's API server runs for them do (apiextensions-
// apiserver's crdHandler with the EstablishingController, and the
// CRDFinalizer): a definition whose names are accepted is installed in the API server
// (its resources join discovery and are served at every served version) and marked
// Established; a deleted definition's objects are deleted before its clean-up
// finalizer is removed, and once it is gone its resources are no longer served.
//
// Both controllers run beside the API server, in its process, over its loopback
// client; the Installer is the server itself.
package crdserving

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubette/kubette/internal/controller/worker"
)

// Name is the serving controller's name in logs.
const Name = "crd-serving"

const syncTimeout = 30 * time.Second

// Installer serves and stops serving a definition's resources (the API server).
type Installer interface {
	// InstallCustomResources serves crd's resources as it is now (a no-op when
	// nothing that is served changed).
	InstallCustomResources(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error
	// RemoveCustomResources stops serving the named definition's resources.
	RemoveCustomResources(name string)
}

// Controller installs the definitions whose names are accepted and marks them
// Established; it stops serving those that are gone.
type Controller struct {
	client    apiextensionsclient.Interface
	lister    apiextensionslisters.CustomResourceDefinitionLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	installer Installer
	log       *slog.Logger
}

// New builds the serving controller on a shared informer factory of the
// apiextensions clientset; the caller starts the factory.
func New(client apiextensionsclient.Interface, f apiextensionsinformers.SharedInformerFactory, installer Installer, log *slog.Logger) (*Controller, error) {
	if client == nil || f == nil || installer == nil {
		return nil, errors.New("crd serving: a client, an informer factory and an installer are required")
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		client: client, installer: installer, log: log.With("controller", Name),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "crd_serving"}),
	}
	inf := f.Apiextensions().V1().CustomResourceDefinitions()
	h, err := inf.Informer().AddEventHandler(enqueueByName(c.queue))
	if err != nil {
		return nil, fmt.Errorf("crd serving: event handler: %w", err)
	}
	c.lister = inf.Lister()
	c.synced = []cache.InformerSynced{h.HasSynced}
	return c, nil
}

// enqueueByName queues the name of every definition added, changed or deleted.
func enqueueByName(q workqueue.TypedRateLimitingInterface[string]) cache.ResourceEventHandlerFuncs {
	add := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
			q.Add(crd.Name)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, cur any) { add(cur) }, DeleteFunc: add}
}

// Run waits for the informer to sync, then runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, worker.Options{
		Name: Name, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log, SyncTimeout: syncTimeout,
	})
}

// Sync serves the named definition as it is (or stops serving it when it is gone or
// its names are not accepted yet), then marks it Established.
func (c *Controller) Sync(ctx context.Context, name string) error {
	crd, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		c.installer.RemoveCustomResources(name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get CRD %s from the cache: %w", name, err)
	}
	if !apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted) &&
		!apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
		// Not served until its names are accepted, as upstream's handler answers 404.
		c.installer.RemoveCustomResources(name)
		return nil
	}
	if err := c.installer.InstallCustomResources(ctx, crd); err != nil {
		return err
	}
	if apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) || crd.DeletionTimestamp != nil {
		return nil
	}
	upd := crd.DeepCopy()
	apihelpers.SetCRDCondition(upd, apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue,
		Reason: "InitialNamesAccepted", Message: "the initial names have been accepted",
	})
	if _, err := c.client.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("mark CRD %s established: %w", name, err)
	}
	return nil
}
