package endpointslice_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/endpoints"
	"github.com/kubette/kubette/internal/controller/endpointslice"
	"github.com/kubette/kubette/internal/controller/garbagecollector"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

const ns = "default"

// kubectlPath is where the machines have the real kubectl.
const kubectlPath = "/usr/bin/kubectl"

// startControllers runs the EndpointSlice, Endpoints and garbage collector
// controllers against env until the test ends.
func startControllers(t *testing.T, env *testenv.Env) {
	t.Helper()
	deps, starter, err := controller.NewDeps(env.Config, "kube-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	var runners []controller.Runner
	for _, build := range []controller.Constructor{
		endpointslice.New,
		endpoints.New,
		func(d controller.Deps) (controller.Runner, error) { return garbagecollector.New(d) },
	} {
		r, err := build(deps)
		if err != nil {
			t.Fatal(err)
		}
		runners = append(runners, r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	starter.Start(ctx)
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Go(func() { r.Run(ctx, 2) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

func service(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"tier": "front"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
}

// podIP is the IP the test gives the n-th pod of a Service.
func podIP(subnet, n int) string { return fmt.Sprintf("10.244.%d.%d", subnet, n+1) }

// createPods creates n pods selected by app on node-a and gives each, as a
// kubelet would through the status subresource, an IP and the Ready condition.
func createPods(t *testing.T, client kubernetes.Interface, app string, subnet, n int) []string {
	t.Helper()
	ctx := context.Background()
	var names []string
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%03d", app, i), Namespace: ns, Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{
				NodeName: "node-a",
				Containers: []corev1.Container{{Name: "app", Image: "example/app:1",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}},
			},
		}
		created, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		setStatus(t, client, created.Name, podIP(subnet+i/250, i%250), true)
		names = append(names, created.Name)
	}
	return names
}

// setStatus gives the pod an IP and sets its readiness.
func setStatus(t *testing.T, client kubernetes.Interface, name, ip string, ready bool) {
	t.Helper()
	ctx := context.Background()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	poll.Until(t, "status of "+name, func() error {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
		_, err = client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

func slicesOf(ctx context.Context, client kubernetes.Interface, svc string) ([]discoveryv1.EndpointSlice, error) {
	list, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// readiness renders the endpoints of slices as sorted "ip:ready".
func readiness(slices []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range slices {
		for _, e := range s.Endpoints {
			out = append(out, fmt.Sprintf("%s:%t", e.Addresses[0], ptr.Deref(e.Conditions.Ready, false)))
		}
	}
	sort.Strings(out)
	return out
}

// endpointsReadiness renders an Endpoints object's addresses the same way.
func endpointsReadiness(ep *corev1.Endpoints) []string {
	var out []string
	for _, s := range ep.Subsets {
		for _, a := range s.Addresses {
			out = append(out, a.IP+":true")
		}
		for _, a := range s.NotReadyAddresses {
			out = append(out, a.IP+":false")
		}
	}
	sort.Strings(out)
	return out
}

// waitEndpoints waits until the Service's slices and Endpoints both list want.
func waitEndpoints(t *testing.T, client kubernetes.Interface, svc string, wantSlices int, want []string) []discoveryv1.EndpointSlice {
	t.Helper()
	ctx := context.Background()
	var got []discoveryv1.EndpointSlice
	poll.Until(t, "endpoints of "+svc, func() error {
		var err error
		if got, err = slicesOf(ctx, client, svc); err != nil {
			return err
		}
		if len(got) != wantSlices {
			var desc []string
			for _, s := range got {
				desc = append(desc, fmt.Sprintf("%s: %d endpoints, %d ports", s.Name, len(s.Endpoints), len(s.Ports)))
			}
			return fmt.Errorf("%d slices, want %d: %s", len(got), wantSlices, strings.Join(desc, "; "))
		}
		if r := readiness(got); !slices.Equal(r, want) {
			return fmt.Errorf("slices list %v", r)
		}
		ep, err := client.CoreV1().Endpoints(ns).Get(ctx, svc, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if r := endpointsReadiness(ep); !slices.Equal(r, want) {
			return fmt.Errorf("Endpoints list %v", r)
		}
		return nil
	})
	return got
}

func TestEndpointsAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	client := env.Client
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{corev1.LabelTopologyZone: "zone-1"}}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startControllers(t, env)

	svc, err := client.CoreV1().Services(ns).Create(ctx, service("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := createPods(t, client, "web", 0, 3)
	want := []string{podIP(0, 0) + ":true", podIP(0, 1) + ":true", podIP(0, 2) + ":true"}
	got := waitEndpoints(t, client, "web", 1, want)

	t.Run("the slice", func(t *testing.T) {
		s := got[0]
		if !strings.HasPrefix(s.Name, "web-") || s.AddressType != discoveryv1.AddressTypeIPv4 ||
			s.Labels[discoveryv1.LabelManagedBy] != endpointslice.ControllerName || s.Labels["tier"] != "front" {
			t.Errorf("slice %s: addressType %s labels %v", s.Name, s.AddressType, s.Labels)
		}
		ref := metav1.GetControllerOf(&s)
		if ref == nil || ref.UID != svc.UID || ref.Kind != "Service" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("owner reference %+v", ref)
		}
		if len(s.Ports) != 1 || ptr.Deref(s.Ports[0].Name, "") != "http" || ptr.Deref(s.Ports[0].Port, 0) != 8080 ||
			ptr.Deref(s.Ports[0].Protocol, "") != corev1.ProtocolTCP {
			t.Errorf("ports %+v", s.Ports)
		}
		e := s.Endpoints[0]
		if ptr.Deref(e.Zone, "") != "zone-1" || ptr.Deref(e.NodeName, "") != "node-a" || e.TargetRef == nil || e.TargetRef.Kind != "Pod" {
			t.Errorf("endpoint %+v", e)
		}
	})

	t.Run("kubectl describe service shows the endpoints", func(t *testing.T) {
		if _, err := os.Stat(kubectlPath); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("kubectl is required in CI: %v", err)
			}
			t.Skipf("no kubectl: %v", err)
		}
		home := t.TempDir()
		cmd := exec.Command(kubectlPath, "--kubeconfig", env.Kubeconfig, "-n", ns, "describe", "service", "web")
		cmd.Env = append(os.Environ(), "HOME="+home, "KUBECACHEDIR="+filepath.Join(home, "cache"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl describe: %v\n%s", err, out)
		}
		line := regexp.MustCompile(`(?m)^Endpoints:\s+(.*)$`).FindStringSubmatch(string(out))
		if line == nil {
			t.Fatalf("no Endpoints line in\n%s", out)
		}
		for i := range 3 {
			if !strings.Contains(line[1], podIP(0, i)+":8080") {
				t.Errorf("Endpoints line %q lacks %s:8080", line[1], podIP(0, i))
			}
		}
	})

	t.Run("a pod turns not ready", func(t *testing.T) {
		setStatus(t, client, pods[1], podIP(0, 1), false)
		waitEndpoints(t, client, "web", 1, []string{podIP(0, 0) + ":true", podIP(0, 1) + ":false", podIP(0, 2) + ":true"})
	})

	t.Run("deleted slices and Endpoints are recreated", func(t *testing.T) {
		want := []string{podIP(0, 0) + ":true", podIP(0, 1) + ":false", podIP(0, 2) + ":true"}
		old := waitEndpoints(t, client, "web", 1, want)
		if err := client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, old[0].Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.CoreV1().Endpoints(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := waitEndpoints(t, client, "web", 1, want); got[0].UID == old[0].UID {
			t.Errorf("slice %s not replaced", got[0].Name)
		}
	})

	t.Run("a terminating pod", func(t *testing.T) {
		// The pod is bound to a node: deleting it only marks it terminating
		// (no kubelet finishes the deletion here).
		if err := client.CoreV1().Pods(ns).Delete(ctx, pods[2], metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "terminating endpoint", func() error {
			got, err := slicesOf(ctx, client, "web")
			if err != nil {
				return err
			}
			if len(got) != 1 {
				return fmt.Errorf("%d slices", len(got))
			}
			for _, e := range got[0].Endpoints {
				if e.Addresses[0] != podIP(0, 2) {
					continue
				}
				if c := e.Conditions; ptr.Deref(c.Ready, true) || !ptr.Deref(c.Serving, false) || !ptr.Deref(c.Terminating, false) {
					return fmt.Errorf("conditions ready=%v serving=%v terminating=%v", ptr.Deref(c.Ready, true), ptr.Deref(c.Serving, false), ptr.Deref(c.Terminating, false))
				}
				ep, err := client.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if r, want := endpointsReadiness(ep), []string{podIP(0, 0) + ":true", podIP(0, 1) + ":false"}; !slices.Equal(r, want) {
					return fmt.Errorf("Endpoints list %v, want %v", r, want)
				}
				return nil
			}
			return fmt.Errorf("no endpoint for the terminating pod")
		})
	})

	t.Run("250 pods take 3 slices", func(t *testing.T) {
		if _, err := client.CoreV1().Services(ns).Create(ctx, service("big"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		createPods(t, client, "big", 10, 250)
		var want []string
		for i := range 250 {
			want = append(want, podIP(10+i/250, i%250)+":true")
		}
		sort.Strings(want)
		var sizes []int
		for _, s := range waitEndpoints(t, client, "big", 3, want) {
			sizes = append(sizes, len(s.Endpoints))
		}
		sort.Ints(sizes)
		if !slices.Equal(sizes, []int{50, 100, 100}) {
			t.Errorf("slice sizes %v", sizes)
		}
	})

	t.Run("deleting the Service removes its slices and Endpoints", func(t *testing.T) {
		if err := client.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "slices and Endpoints gone", func() error {
			got, err := slicesOf(ctx, client, "web")
			if err != nil {
				return err
			}
			if len(got) != 0 {
				return fmt.Errorf("%d slices left", len(got))
			}
			if _, err := client.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Endpoints still there (err %v)", err)
			}
			return nil
		})
	})
}
