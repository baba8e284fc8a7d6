package ingress

import (
	"context"
	"errors"
	"fmt"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// writeStatuses sets status.loadBalancer.ingress to PublishIP on the served
// Ingresses and clears it on those that carry exactly that address but are
// not served (any more).
func (c *Controller) writeStatuses(ctx context.Context, all []*networkingv1.Ingress, served []string) error {
	want := []networkingv1.IngressLoadBalancerIngress{{IP: c.o.PublishIP}}
	var errs []error
	for _, ing := range all {
		key := ing.Namespace + "/" + ing.Name
		cur := ing.Status.LoadBalancer.Ingress
		var next []networkingv1.IngressLoadBalancerIngress
		switch {
		case slices.Contains(served, key):
			if equalLB(cur, want) {
				continue
			}
			next = want
		case equalLB(cur, want):
			next = nil
		default:
			continue
		}
		cp := ing.DeepCopy()
		cp.Status.LoadBalancer.Ingress = next
		_, err := c.o.Client.NetworkingV1().Ingresses(ing.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("update status of ingress %s: %w", key, err))
		}
	}
	return errors.Join(errs...)
}

func equalLB(a, b []networkingv1.IngressLoadBalancerIngress) bool {
	return slices.EqualFunc(a, b, func(x, y networkingv1.IngressLoadBalancerIngress) bool {
		return x.IP == y.IP && x.Hostname == y.Hostname && len(x.Ports) == 0 && len(y.Ports) == 0
	})
}
