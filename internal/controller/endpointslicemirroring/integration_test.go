package endpointslicemirroring_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/endpointslicemirroring"
	"github.com/kubette/kubette/internal/controllermanager"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// TestMirrorsThroughCreateUpdateDelete runs the controller in the controller manager
// against an API server, through the steps of the conformance test: a Service without
// a selector, its Endpoints created, updated and deleted.
func TestMirrorsThroughCreateUpdateDelete(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	ctx := context.Background()
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	runErr := make(chan error, 1)
	wg.Go(func() {
		runErr <- controllermanager.Run(runCtx, controller.ManagerOptions{Config: env.Config, Enabled: []string{endpointslicemirroring.Name}})
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if err := <-runErr; err != nil {
			t.Errorf("controller manager: %v", err)
		}
	})

	const ns = "default"
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "example-custom-endpoints"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "example", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: svc.Name},
		Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80}}, Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}}}}}
	if _, err := c.CoreV1().Endpoints(ns).Create(ctx, ep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantSlices := func(what string, want ...string) {
		t.Helper()
		poll.Until(t, what, func() error {
			l, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
			if err != nil {
				return err
			}
			var got []string
			for _, s := range l.Items {
				if s.Labels[discoveryv1.LabelManagedBy] != endpointslicemirroring.ManagedBy {
					return fmt.Errorf("slice %s managed by %q", s.Name, s.Labels[discoveryv1.LabelManagedBy])
				}
				for _, e := range s.Endpoints {
					got = append(got, fmt.Sprintf("%s:%d", e.Addresses[0], *s.Ports[0].Port))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) || len(l.Items) != len(want) {
				return fmt.Errorf("%d slices with %v, want %v", len(l.Items), got, want)
			}
			return nil
		})
	}
	wantSlices("the mirrored slice", "10.1.2.3:80")

	cur, err := c.CoreV1().Endpoints(ns).Get(ctx, svc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Subsets[0].Addresses = []corev1.EndpointAddress{{IP: "10.2.3.4"}}
	if _, err := c.CoreV1().Endpoints(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantSlices("the slice updated", "10.2.3.4:80")

	if err := c.CoreV1().Endpoints(ns).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantSlices("the slice deleted")
}
