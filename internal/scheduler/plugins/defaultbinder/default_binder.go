// Package defaultbinder is the DefaultBinder bind plugin: it binds a pod by
// POSTing a Binding to the pods/binding subresource, as upstream.
package defaultbinder

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/poster"
)

// Name is the plugin's registered name.
const Name = "DefaultBinder"

// DefaultBinder binds pods through the API server.
type DefaultBinder struct {
	handle framework.Handle
	// poster posts the bindings when the clientset has a real REST client
	// (made on the first bind: plugins are built before the client is used).
	posterOnce sync.Once
	poster     *poster.Poster
}

var _ framework.BindPlugin = (*DefaultBinder)(nil)

// New returns the plugin; it takes no arguments (args is ignored) and needs a
// handle with a ClientSet.
func New(_ context.Context, _ any, h framework.Handle) (framework.Plugin, error) {
	if h == nil {
		return nil, errors.New("DefaultBinder needs a framework handle")
	}
	return &DefaultBinder{handle: h}, nil
}

// Name returns Name.
func (b *DefaultBinder) Name() string { return Name }

// Bind creates the pod's Binding to nodeName. The pod's UID is sent so a pod
// deleted and re-created under the same name is not bound by mistake.
func (b *DefaultBinder) Bind(ctx context.Context, _ *framework.CycleState, pod *corev1.Pod, nodeName string) *framework.Status {
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if err := b.bind(ctx, binding); err != nil {
		return framework.AsStatus(fmt.Errorf("failed to bind pod %s/%s to node %q: %w", pod.Namespace, pod.Name, nodeName, err))
	}
	return nil
}

// bind posts the binding: with the poster when the clientset has a real REST
// client (client-go's request builder was two thirds of a bind's CPU in the
// scheduler; the typed client's Bind also encodes its empty CreateOptions by
// reflection), with the typed call otherwise (fakes).
func (b *DefaultBinder) bind(ctx context.Context, binding *corev1.Binding) error {
	c := b.handle.ClientSet().CoreV1()
	b.posterOnce.Do(func() {
		if rc, ok := c.RESTClient().(*rest.RESTClient); ok && rc != nil {
			b.poster, _ = poster.New(rc) // nil without an HTTP client: the typed call below
		}
	})
	if b.poster != nil {
		return b.poster.Post(ctx, poster.Path(binding.Namespace, "pods", binding.Name, "binding"), binding, nil,
			schema.GroupResource{Resource: "pods"}, binding.Name)
	}
	return bindTyped(ctx, c, binding)
}

// bindTyped posts the binding with the typed client.
func bindTyped(ctx context.Context, c corev1client.CoreV1Interface, b *corev1.Binding) error {
	return c.Pods(b.Namespace).Bind(ctx, b, metav1.CreateOptions{})
}
