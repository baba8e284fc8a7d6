// Package defaultbinder is the DefaultBinder bind plugin: it binds a pod by
// POSTing a Binding to the pods/binding subresource, as upstream.
package defaultbinder

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// Name is the plugin's registered name.
const Name = "DefaultBinder"

// DefaultBinder binds pods through the API server.
type DefaultBinder struct {
	handle framework.Handle
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
	if err := bind(ctx, b.handle.ClientSet().CoreV1(), binding); err != nil {
		return framework.AsStatus(fmt.Errorf("failed to bind pod %s/%s to node %q: %w", pod.Namespace, pod.Name, nodeName, err))
	}
	return nil
}

// bind posts the binding. The typed client's Bind encodes its empty CreateOptions into
// query parameters by reflection on every call (with the Scheduled Event's create, 3.5 %
// of `up`'s CPU while binding at 5000 nodes), so a real client posts with its REST
// client; a fake one, which has none, gets the typed call.
func bind(ctx context.Context, c corev1client.CoreV1Interface, b *corev1.Binding) error {
	if rc, ok := c.RESTClient().(*rest.RESTClient); ok && rc != nil {
		return rc.Post().Namespace(b.Namespace).Resource("pods").Name(b.Name).SubResource("binding").Body(b).Do(ctx).Error()
	}
	return c.Pods(b.Namespace).Bind(ctx, b, metav1.CreateOptions{})
}
