// Package rootcacertpublisher is the root CA certificate publisher: every namespace
// has a ConfigMap "kube-root-ca.crt" whose key "ca.crt" holds the cluster's CA bundle
// (PEM), with which a pod verifies the API server at kubernetes.default.svc (client-go's
// in-cluster configuration and projected service account volumes read it).
//
// It follows upstream pkg/controller/certificates/rootcacertpublisher: a queue of
// namespace names fed by namespace adds, by updates of Active namespaces, and by
// updates and deletions of the ConfigMap; a sync that creates the ConfigMap when the
// lister lacks it and rewrites its data and description annotation when they differ.
// A create refused because the namespace is gone or being terminated is not retried.
package rootcacertpublisher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/worker"
)

// Name is the controller's name in the controller manager's registry (upstream's
// --controllers name).
const Name = "root-ca-cert-publisher"

// ConfigMapName is the name of the ConfigMap published in every namespace.
const ConfigMapName = "kube-root-ca.crt"

// DataKey is the ConfigMap's key holding the CA bundle.
const DataKey = "ca.crt"

// DescriptionAnnotation is the annotation that says what the ConfigMap is for.
const DescriptionAnnotation = "kubernetes.io/description"

// Description is the value of DescriptionAnnotation, as upstream words it.
const Description = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. " +
	"No other usage is guaranteed across distributions of Kubernetes clusters."

// syncTimeout bounds one sync, so that a hanging request cannot hold a worker forever.
const syncTimeout = time.Minute

// Publisher keeps the root CA ConfigMap of every namespace.
type Publisher struct {
	client   kubernetes.Interface
	rootCA   string
	cmLister corelisters.ConfigMapLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	log      *slog.Logger
}

var _ controller.Runner = (*Publisher)(nil)

// New builds the publisher of d.RootCA and registers its ConfigMap and namespace informers.
func New(d controller.Deps) (*Publisher, error) {
	if d.Client == nil || d.Informers == nil {
		return nil, errors.New("root CA publisher: Client and Informers are required")
	}
	if len(d.RootCA) == 0 {
		return nil, errors.New("root CA publisher: no root CA bundle (give the controller manager --root-ca-file or a kubeconfig with a certificate authority)")
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	p := &Publisher{
		client: d.Client,
		rootCA: string(d.RootCA),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "root_ca_cert_publisher"}),
		log: log.With("controller", Name),
	}
	cmInformer := d.Informers.Core().V1().ConfigMaps()
	cmHandler, err := cmInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { p.configMapChanged(obj) },
		DeleteFunc: p.configMapChanged,
	})
	if err != nil {
		return nil, fmt.Errorf("root CA publisher: config map event handler: %w", err)
	}
	nsInformer := d.Informers.Core().V1().Namespaces()
	nsHandler, err := nsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.namespaceAdded,
		UpdateFunc: func(_, obj any) { p.namespaceUpdated(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("root CA publisher: namespace event handler: %w", err)
	}
	p.cmLister = cmInformer.Lister()
	p.synced = []cache.InformerSynced{cmHandler.HasSynced, nsHandler.HasSynced}
	return p, nil
}

// configMapChanged queues the namespace of an updated or deleted root CA ConfigMap.
func (p *Publisher) configMapChanged(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		tombstone, isTombstone := obj.(cache.DeletedFinalStateUnknown)
		if !isTombstone {
			return
		}
		if cm, ok = tombstone.Obj.(*corev1.ConfigMap); !ok {
			return
		}
	}
	if cm.Name == ConfigMapName {
		p.queue.Add(cm.Namespace)
	}
}

// namespaceAdded queues a new (or re-listed) namespace.
func (p *Publisher) namespaceAdded(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		p.queue.Add(ns.Name)
	}
}

// namespaceUpdated queues an updated namespace unless it is no longer Active.
func (p *Publisher) namespaceUpdated(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok && ns.Status.Phase == corev1.NamespaceActive {
		p.queue.Add(ns.Name)
	}
}

// Run waits for the informers to sync, then runs workers until ctx is done and they
// have all returned.
func (p *Publisher) Run(ctx context.Context, workers int) {
	worker.Run(ctx, p.queue, worker.Options{
		Name: Name, Workers: workers, Synced: p.synced, Sync: p.Sync, Log: p.log, SyncTimeout: syncTimeout,
	})
}

// Sync makes the root CA ConfigMap of one namespace what it must be: created when the
// lister lacks it (a create that finds it exists is retried, to compare it once the
// cache has it), updated when its data or description annotation differ. Other data
// keys are dropped; other annotations, labels and binary data are kept, as upstream does.
func (p *Publisher) Sync(ctx context.Context, namespace string) error {
	want := map[string]string{DataKey: p.rootCA}
	cm, err := p.cmLister.ConfigMaps(namespace).Get(ConfigMapName)
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Annotations: map[string]string{DescriptionAnnotation: Description}},
			Data:       want,
		}
		_, err := p.client.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{})
		switch {
		case err == nil, apierrors.IsNotFound(err), apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			// Gone or terminating: nothing to publish into, and no retry.
			return nil
		default:
			return fmt.Errorf("failed to create config map %s/%s: %w", namespace, ConfigMapName, err)
		}
	}
	if err != nil {
		return fmt.Errorf("failed to get config map %s/%s from the cache: %w", namespace, ConfigMapName, err)
	}
	if maps.Equal(cm.Data, want) && cm.Annotations[DescriptionAnnotation] != "" {
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = want
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[DescriptionAnnotation] = Description
	if _, err := p.client.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("failed to update config map %s/%s: %w", namespace, ConfigMapName, err)
	}
	return nil
}
