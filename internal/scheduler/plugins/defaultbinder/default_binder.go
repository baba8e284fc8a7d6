// Package defaultbinder is the DefaultBinder bind plugin: it binds a pod by
// POSTing a Binding to the pods/binding subresource, as upstream.
package defaultbinder

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	if err := b.handle.ClientSet().CoreV1().Pods(binding.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return framework.AsStatus(fmt.Errorf("failed to bind pod %s/%s to node %q: %w", pod.Namespace, pod.Name, nodeName, err))
	}
	return nil
}
