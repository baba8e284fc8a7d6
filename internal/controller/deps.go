package controller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/kubette/kubette/internal/inprocess/objwatch"
)

// NewDeps builds the shared clients and informers from a client configuration. The
// configuration's rate limits are raised so that internal clients are never held back
// by client-side throttling (the API server is the only judge of load). Call Start
// after every constructor registered its informers; it returns when ctx is done.
func NewDeps(cfg *rest.Config, userAgent string) (Deps, *Starter, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 5000, 10000
	c = rest.AddUserAgent(c, userAgent)
	// The typed clients speak protobuf, as upstream's controller manager does.
	pc := rest.CopyConfig(c)
	pc.ContentType, pc.AcceptContentTypes = "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(pc)
	if err != nil {
		return Deps{}, nil, fmt.Errorf("clientset: %w", err)
	}
	md, err := metadata.NewForConfig(c)
	if err != nil {
		return Deps{}, nil, fmt.Errorf("metadata client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return Deps{}, nil, fmt.Errorf("discovery client: %w", err)
	}
	cached := memory.NewMemCacheClient(disc)
	broadcaster := record.NewBroadcaster()
	d := Deps{
		Client:            client,
		Config:            c,
		Informers:         informers.NewSharedInformerFactory(client, 0),
		Metadata:          md,
		MetadataInformers: metadatainformer.NewSharedInformerFactory(md, 0),
		Discovery:         cached,
		RESTMapper:        restmapper.NewDeferredDiscoveryRESTMapper(cached),
		Logger:            slog.Default(),
		Recorder: func(component string) record.EventRecorder {
			return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
		},
	}
	return d, &Starter{deps: d, broadcaster: broadcaster, client: client, config: pc}, nil
}

// Starter starts what NewDeps created.
type Starter struct {
	deps        Deps
	broadcaster record.EventBroadcaster
	client      kubernetes.Interface
	config      *rest.Config // the typed client's
}

// ServePodsAsObjects registers the pod informer of the shared informer factory with
// its watch served as objects when the clients reach the API server in-process
// (`kubette up`; package objwatch): each event's pod is deep-copied for this informer
// instead of encoded by the API server and decoded here. Pods are the controllers'
// busiest watch. Call it before any controller asks for the pod informer, so that
// every one gets this one; elsewhere it does nothing.
func (s *Starter) ServePodsAsObjects() {
	ow, ok := objwatch.ForConfig(s.config)
	if !ok {
		return
	}
	s.deps.Informers.InformerFor(&corev1.Pod{}, func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return ow.PodInformer(cs, nil, nil, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	})
}

// Start starts event recording and every informer registered so far; all stop when ctx is done.
func (s *Starter) Start(ctx context.Context) {
	s.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.client.CoreV1().Events("")})
	go func() {
		<-ctx.Done()
		s.broadcaster.Shutdown()
	}()
	s.deps.Informers.Start(ctx.Done())
	s.deps.MetadataInformers.Start(ctx.Done())
}
