package objwatch

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// watchRequest is the request client-go's typed Watch sends for opts (see
// gentype.Client.Watch): watch=true, the options as query parameters, and the
// client-side timeout from opts.TimeoutSeconds.
func watchRequest(rc rest.Interface, resource, namespace string, opts metav1.ListOptions) *rest.Request {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	opts.Watch = true
	return rc.Get().NamespaceIfScoped(namespace, namespace != "").Resource(resource).
		VersionedParams(&opts, scheme.ParameterCodec).Timeout(timeout)
}

// PodListWatch is the ListWatch of client-go's pod informer (NewFilteredPodInformer)
// with the watch served as objects: the list through cs, as client-go's, and each
// watch event's pod copied with copyObj (DeepCopy when nil).
func (c *Client) PodListWatch(cs kubernetes.Interface, namespace string, tweak func(*metav1.ListOptions), copyObj CopyFunc) cache.ListerWatcher {
	gr := corev1.Resource("pods")
	return c.listWatch(cs, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return cs.CoreV1().Pods(namespace).List(ctx, opts)
	}, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return c.Watch(ctx, watchRequest(cs.CoreV1().RESTClient(), "pods", namespace, opts), gr, copyObj)
	}, tweak)
}

// PodInformer is client-go's pod informer (NewFilteredPodInformer) over
// PodListWatch: every namespace's pods filtered by tweak, each watch event's pod
// copied with copyObj.
func (c *Client) PodInformer(cs kubernetes.Interface, tweak func(*metav1.ListOptions), copyObj CopyFunc, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformerWithOptions(c.PodListWatch(cs, metav1.NamespaceAll, tweak, copyObj), &corev1.Pod{},
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: indexers})
}

// NodeInformer is client-go's node informer over NodeListWatch.
func (c *Client) NodeInformer(cs kubernetes.Interface, copyObj CopyFunc, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformerWithOptions(c.NodeListWatch(cs, nil, copyObj), &corev1.Node{},
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: indexers})
}

// NodeListWatch is the ListWatch of client-go's node informer with the watch served
// as objects, each node copied with copyObj (DeepCopy when nil).
func (c *Client) NodeListWatch(cs kubernetes.Interface, tweak func(*metav1.ListOptions), copyObj CopyFunc) cache.ListerWatcher {
	gr := corev1.Resource("nodes")
	return c.listWatch(cs, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return cs.CoreV1().Nodes().List(ctx, opts)
	}, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return c.Watch(ctx, watchRequest(cs.CoreV1().RESTClient(), "nodes", "", opts), gr, copyObj)
	}, tweak)
}

// listWatch builds a ListWatch as client-go's generated informers do, with the same
// watch-list semantics as cs's.
func (c *Client) listWatch(cs kubernetes.Interface, list cache.ListWithContextFunc, watchFn cache.WatchFuncWithContext, tweak func(*metav1.ListOptions)) cache.ListerWatcher {
	apply := func(opts *metav1.ListOptions) {
		if tweak != nil {
			tweak(opts)
		}
	}
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListFunc: func(opts metav1.ListOptions) (runtime.Object, error) {
			apply(&opts)
			return list(context.Background(), opts)
		},
		WatchFunc: func(opts metav1.ListOptions) (watch.Interface, error) {
			apply(&opts)
			return watchFn(context.Background(), opts)
		},
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			apply(&opts)
			return list(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			apply(&opts)
			return watchFn(ctx, opts)
		},
	}, cs)
}
