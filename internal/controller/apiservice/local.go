// Package apiservice keeps the APIServices of apiregistration.k8s.io as upstream's
// kube-aggregator and kube-apiserver do: a local APIService for every built-in
// group-version the server serves and for every served version of a
// CustomResourceDefinition (upstream's autoregister and crdregistration controllers,
// the former used as it is from k8s.io/kube-aggregator), the registration of each
// APIService with the API server's proxy, and the resolution of an APIService's
// Service to one of its endpoints. The availability of remote APIServices is
// upstream's own controller (k8s.io/kube-aggregator/pkg/controllers/status/remote),
// which the control plane runs beside these.
package apiservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset/typed/apiregistration/v1"
	apiregistrationinformers "k8s.io/kube-aggregator/pkg/client/informers/externalversions/apiregistration/v1"
	apiregistrationlisters "k8s.io/kube-aggregator/pkg/client/listers/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/controllers/autoregister"

	"github.com/kubette/kubette/internal/controller/worker"
)

// LocalName is the local APIService controller's name in logs.
const LocalName = "apiservice-autoregistration"

// Registration is upstream's autoregister controller's interface: the APIServices it
// keeps, once at start or continuously.
type Registration interface {
	AddAPIServiceToSyncOnStart(in *apiregistrationv1.APIService)
	AddAPIServiceToSync(in *apiregistrationv1.APIService)
	RemoveAPIServiceToSync(name string)
}

// Local keeps the local APIServices: those of the built-in group-versions, created
// (or repaired) once at start as upstream's "onstart" ones, and those of the custom
// resources' group-versions, kept continuously while a CustomResourceDefinition
// serves the version (upstream's crdregistration controller).
type Local struct {
	auto interface {
		Registration
		Run(workers int, stopCh <-chan struct{})
	}
	crds        apiextensionslisters.CustomResourceDefinitionLister
	apiServices apiregistrationlisters.APIServiceLister
	// replaceable are the local APIServices of built-in group-versions that a user may
	// point at an extension server for good (see ReplaceableByExtension).
	replaceable []*apiregistrationv1.APIService
	synced      []cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string]
	log         *slog.Logger
}

// NewLocal builds the controller: builtin are the built-in group-versions the server
// serves (those without an upstream priority get no APIService, as upstream). The
// caller starts the informers' factories.
func NewLocal(client apiregistrationclient.APIServicesGetter, apiServices apiregistrationinformers.APIServiceInformer,
	crds apiextensionsinformers.CustomResourceDefinitionInformer, builtin []schema.GroupVersion, log *slog.Logger) (*Local, error) {
	if client == nil || apiServices == nil || crds == nil {
		return nil, errors.New("apiservice autoregistration: a client and informers are required")
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Local{
		auto: autoregister.NewAutoRegisterController(apiServices, client),
		crds: crds.Lister(), apiServices: apiServices.Lister(), log: log.With("controller", LocalName),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "crd_autoregistration"}),
	}
	for _, gv := range builtin {
		s := BuiltinAPIService(gv)
		switch {
		case s == nil:
		case ReplaceableByExtension(gv):
			c.replaceable = append(c.replaceable, s) // decided once the APIServices are known
		default:
			c.auto.AddAPIServiceToSyncOnStart(s)
		}
	}
	enqueue := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
			for _, v := range crd.Spec.Versions {
				c.queue.Add(schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}.String())
			}
		}
	}
	h, err := crds.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, DeleteFunc: enqueue,
		UpdateFunc: func(old, cur any) { enqueue(old); enqueue(cur) },
	})
	if err != nil {
		return nil, fmt.Errorf("apiservice autoregistration: event handler: %w", err)
	}
	c.synced = []cache.InformerSynced{h.HasSynced, apiServices.Informer().HasSynced}
	return c, nil
}

// BuiltinAPIService is the local APIService of a built-in group-version, with
// upstream's priorities; nil when upstream has none for it.
func BuiltinAPIService(gv schema.GroupVersion) *apiregistrationv1.APIService {
	p, ok := BuiltinPriority(gv)
	if !ok {
		return nil
	}
	return localAPIService(gv, p)
}

func localAPIService(gv schema.GroupVersion, p Priority) *apiregistrationv1.APIService {
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: gv.Version + "." + gv.Group},
		Spec: apiregistrationv1.APIServiceSpec{
			Group: gv.Group, Version: gv.Version, GroupPriorityMinimum: p.Group, VersionPriority: p.Version,
		},
	}
}

// Run syncs every custom resource group-version once, then starts upstream's
// autoregister controller (so that its first pass does not delete the APIServices of
// definitions not seen yet, as upstream orders them), and runs until ctx is done.
func (c *Local) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, worker.Options{
		Name: LocalName, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log,
		AfterSync: func() {
			c.registerReplaceable()
			if err := c.syncAll(); err != nil {
				c.log.Warn("register the custom resources' APIServices", "err", err)
			}
			go c.auto.Run(workers, ctx.Done())
		},
	})
}

// registerReplaceable hands the replaceable local APIServices to autoregister (once,
// at start, as the other built-in ones). One whose current APIService names a Service
// is the user's: an extension server for that group-version was installed
// (metrics-server for metrics.k8s.io), which the aggregator proxies to. Autoregister
// is then given the user's own spec, so that it neither turns the APIService back into
// the local one nor, should it still carry the automanaged label (kubectl apply over
// kubette's object keeps it), deletes it as one it does not want. Deleting it makes
// the group-version local again: at once in serving, and its local APIService is
// created at the next start.
func (c *Local) registerReplaceable() {
	for _, s := range c.replaceable {
		cur, err := c.apiServices.Get(s.Name)
		if err == nil && cur.Spec.Service != nil {
			c.log.Info("a user's APIService serves this group-version: left as it is", "apiservice", s.Name,
				"service", cur.Spec.Service.Namespace+"/"+cur.Spec.Service.Name)
			s = s.DeepCopy()
			cur.Spec.DeepCopyInto(&s.Spec)
		}
		c.auto.AddAPIServiceToSyncOnStart(s)
	}
}

// syncAll registers every served group-version of every definition in the cache.
func (c *Local) syncAll() error {
	crds, err := c.crds.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list CRDs from the cache: %w", err)
	}
	var errs []error
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			errs = append(errs, c.Sync(context.Background(), schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}.String()))
		}
	}
	return errors.Join(errs...)
}

// Sync keeps the APIService of one group-version (key "group/version") while some
// definition serves it, and lets upstream's autoregister controller delete it when
// none does.
func (c *Local) Sync(_ context.Context, key string) error {
	gv, err := schema.ParseGroupVersion(key)
	if err != nil {
		return fmt.Errorf("parse group-version %q: %w", key, err)
	}
	crds, err := c.crds.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list CRDs from the cache: %w", err)
	}
	for _, crd := range crds {
		if crd.Spec.Group != gv.Group {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == gv.Version && v.Served {
				c.auto.AddAPIServiceToSync(localAPIService(gv, customResourcePriority))
				return nil
			}
		}
	}
	c.auto.RemoveAPIServiceToSync(gv.Version + "." + gv.Group)
	return nil
}
