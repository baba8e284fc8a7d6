package apiservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationinformers "k8s.io/kube-aggregator/pkg/client/informers/externalversions/apiregistration/v1"
	apiregistrationlisters "k8s.io/kube-aggregator/pkg/client/listers/apiregistration/v1"

	"github.com/kubette/kubette/internal/controller/worker"
)

// RegistrationName is the registration controller's name in logs.
const RegistrationName = "apiservice-registration"

// HandlerManager is the API server's proxy: the APIServices it serves (upstream's
// APIHandlerManager).
type HandlerManager interface {
	AddAPIService(s *apiregistrationv1.APIService) error
	RemoveAPIService(name string)
}

// Registrar tells the API server about every APIService as it changes, as upstream's
// APIServiceRegistrationController: the proxy learns a remote APIService, its
// Service and its availability, and forgets a deleted one.
type Registrar struct {
	handlers HandlerManager
	lister   apiregistrationlisters.APIServiceLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	log      *slog.Logger
}

// NewRegistrar builds the controller; the caller starts the informer's factory.
func NewRegistrar(apiServices apiregistrationinformers.APIServiceInformer, handlers HandlerManager, log *slog.Logger) (*Registrar, error) {
	if apiServices == nil || handlers == nil {
		return nil, errors.New("apiservice registration: an informer and the server are required")
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Registrar{
		handlers: handlers, lister: apiServices.Lister(), log: log.With("controller", RegistrationName),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "apiservice_registration"}),
	}
	enqueue := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if s, ok := obj.(*apiregistrationv1.APIService); ok {
			c.queue.Add(s.Name)
		}
	}
	h, err := apiServices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, DeleteFunc: enqueue, UpdateFunc: func(_, cur any) { enqueue(cur) },
	})
	if err != nil {
		return nil, fmt.Errorf("apiservice registration: event handler: %w", err)
	}
	c.synced = []cache.InformerSynced{h.HasSynced}
	return c, nil
}

// Run waits for the informer to sync, then runs workers until ctx is done.
func (c *Registrar) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, worker.Options{Name: RegistrationName, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log})
}

// Sync hands the named APIService, as the cache has it, to the server.
func (c *Registrar) Sync(_ context.Context, name string) error {
	s, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		c.handlers.RemoveAPIService(name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get APIService %s from the cache: %w", name, err)
	}
	return c.handlers.AddAPIService(s)
}
