package apiserver_test

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/testenv"
)

func svcSpec(name string, typ corev1.ServiceType, ports ...corev1.ServicePort) *corev1.Service {
	if len(ports) == 0 {
		ports = []corev1.ServicePort{{Name: "http", Port: 80}}
	}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name}, Ports: ports}}
}

func createSvc(t *testing.T, c kubernetes.Interface, svc *corev1.Service) *corev1.Service {
	t.Helper()
	got, err := c.CoreV1().Services("default").Create(ctxT(t), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s: %v", svc.Name, err)
	}
	return got
}

// wantInvalid checks a 422 with one cause on field whose message is msg.
func wantInvalid(t *testing.T, err error, field, msg string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want 422 Invalid", err)
	}
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		if c.Field == field && strings.Contains(c.Message, msg) {
			return
		}
	}
	t.Fatalf("422 without a cause on %s saying %q: %v", field, msg, err)
}

func inRange(t *testing.T, ip string) {
	t.Helper()
	a, err := netip.ParseAddr(ip)
	if err != nil || !netip.MustParsePrefix("10.96.0.0/12").Contains(a) {
		t.Fatalf("cluster IP %q is not in 10.96.0.0/12", ip)
	}
}

func TestServiceClusterIPAllocation(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	ctx := ctxT(t)
	svcs := c.CoreV1().Services("default")

	// The kubernetes Service holds the first address, with endpoints pointing at the server.
	k, err := svcs.Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kubernetes Service: %v", err)
	}
	if k.Spec.ClusterIP != "10.96.0.1" || len(k.Spec.Ports) != 1 || k.Spec.Ports[0].Port != 443 || k.Spec.Ports[0].Name != "https" {
		t.Fatalf("kubernetes Service spec = %+v", k.Spec)
	}

	a := createSvc(t, c, svcSpec("a", ""))
	inRange(t, a.Spec.ClusterIP)
	if len(a.Spec.ClusterIPs) != 1 || a.Spec.ClusterIPs[0] != a.Spec.ClusterIP {
		t.Fatalf("clusterIPs = %v, clusterIP = %s", a.Spec.ClusterIPs, a.Spec.ClusterIP)
	}
	if a.Spec.IPFamilyPolicy == nil || *a.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack ||
		len(a.Spec.IPFamilies) != 1 || a.Spec.IPFamilies[0] != corev1.IPv4Protocol {
		t.Fatalf("ip families = %v %v", a.Spec.IPFamilyPolicy, a.Spec.IPFamilies)
	}
	for _, p := range a.Spec.Ports {
		if p.NodePort != 0 {
			t.Fatalf("ClusterIP service got a node port: %+v", p)
		}
	}

	// A requested address is honoured when free, refused when taken or out of range.
	b := svcSpec("b", corev1.ServiceTypeClusterIP)
	b.Spec.ClusterIP = "10.96.0.5"
	if got := createSvc(t, c, b); got.Spec.ClusterIP != "10.96.0.5" || got.Spec.ClusterIPs[0] != "10.96.0.5" {
		t.Fatalf("requested IP: got %s %v", got.Spec.ClusterIP, got.Spec.ClusterIPs)
	}
	dup := svcSpec("dup", "")
	dup.Spec.ClusterIP = "10.96.0.5"
	_, err = svcs.Create(ctx, dup, metav1.CreateOptions{})
	wantInvalid(t, err, "spec.clusterIPs", "failed to allocate IP 10.96.0.5: provided IP is already allocated")
	if !strings.Contains(err.Error(), `spec.clusterIPs: Invalid value: "10.96.0.5": failed to allocate IP 10.96.0.5: provided IP is already allocated`) {
		t.Fatalf("message = %v", err)
	}
	out := svcSpec("out", "")
	out.Spec.ClusterIP = "192.168.7.7"
	_, err = svcs.Create(ctx, out, metav1.CreateOptions{})
	wantInvalid(t, err, "spec.clusterIPs", "provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/12")
	first := svcSpec("first", "")
	first.Spec.ClusterIP = "10.96.0.1"
	_, err = svcs.Create(ctx, first, metav1.CreateOptions{})
	wantInvalid(t, err, "spec.clusterIPs", "provided IP is already allocated")

	// Headless and ExternalName services get no address.
	h := svcSpec("headless", "")
	h.Spec.ClusterIP = corev1.ClusterIPNone
	if got := createSvc(t, c, h); got.Spec.ClusterIP != "None" || len(got.Spec.ClusterIPs) != 1 || got.Spec.ClusterIPs[0] != "None" ||
		*got.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
		t.Fatalf("headless: %+v", got.Spec)
	}
	en := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}}
	if got := createSvc(t, c, en); got.Spec.ClusterIP != "" || len(got.Spec.ClusterIPs) != 0 || got.Spec.IPFamilyPolicy != nil || len(got.Spec.IPFamilies) != 0 {
		t.Fatalf("ExternalName: %+v", got.Spec)
	}

	// The address is immutable.
	_, err = svcs.Patch(ctx, "b", types.MergePatchType, []byte(`{"spec":{"clusterIP":"10.96.0.6","clusterIPs":["10.96.0.6"]}}`), metav1.PatchOptions{})
	wantInvalid(t, err, "spec.clusterIPs[0]", "may not change once set")
	// A PUT without the address keeps it.
	cur, _ := svcs.Get(ctx, "b", metav1.GetOptions{})
	cur.Spec.ClusterIP, cur.Spec.ClusterIPs = "", nil
	cur.Labels = map[string]string{"x": "y"}
	if got, err := svcs.Update(ctx, cur, metav1.UpdateOptions{}); err != nil || got.Spec.ClusterIP != "10.96.0.5" {
		t.Fatalf("update without clusterIP: %v, %v", got.Spec.ClusterIP, err)
	}

	// A failed create (validation after allocation) leaks nothing.
	bad := svcSpec("bad", "")
	bad.Spec.ClusterIP = "10.96.0.7"
	bad.Spec.Ports = append(bad.Spec.Ports, corev1.ServicePort{Name: "http", Port: 81}) // duplicate port name
	if _, err := svcs.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("invalid create: %v", err)
	}
	again := svcSpec("again", "")
	again.Spec.ClusterIP = "10.96.0.7"
	createSvc(t, c, again)

	// A dry run allocates nothing.
	dry := svcSpec("dry", "")
	dry.Spec.ClusterIP = "10.96.0.8"
	if got, err := svcs.Create(ctx, dry, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil || got.Spec.ClusterIP != "10.96.0.8" {
		t.Fatalf("dry run: %v %v", got, err)
	}
	dry2 := svcSpec("dry2", "")
	dry2.Spec.ClusterIP = "10.96.0.8"
	createSvc(t, c, dry2)

	// Delete releases: the address can be requested again.
	if err := svcs.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b2 := svcSpec("b2", "")
	b2.Spec.ClusterIP = "10.96.0.5"
	createSvc(t, c, b2)

	// ExternalName → ClusterIP allocates; back to ExternalName releases.
	ext, _ := svcs.Get(ctx, "ext", metav1.GetOptions{})
	ext.Spec.Type, ext.Spec.ExternalName = corev1.ServiceTypeClusterIP, ""
	ext.Spec.Ports = []corev1.ServicePort{{Port: 80}}
	ext.Spec.ClusterIP = "10.96.0.9"
	ext, err = svcs.Update(ctx, ext, metav1.UpdateOptions{})
	if err != nil || ext.Spec.ClusterIP != "10.96.0.9" || len(ext.Spec.IPFamilies) != 1 {
		t.Fatalf("to ClusterIP: %v, %v", err, ext)
	}
	ext.Spec.Type, ext.Spec.ExternalName = corev1.ServiceTypeExternalName, "example.com"
	ext, err = svcs.Update(ctx, ext, metav1.UpdateOptions{})
	if err != nil || ext.Spec.ClusterIP != "" || len(ext.Spec.ClusterIPs) != 0 {
		t.Fatalf("to ExternalName: %v, %+v", err, ext.Spec)
	}
	nine := svcSpec("nine", "")
	nine.Spec.ClusterIP = "10.96.0.9"
	createSvc(t, c, nine)

	// A Service held by a finalizer keeps its address until the finalizer goes.
	fin := svcSpec("fin", "")
	fin.Finalizers = []string{"example.com/hold"}
	fin.Spec.ClusterIP = "10.96.0.11"
	createSvc(t, c, fin)
	if err := svcs.Delete(ctx, "fin", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	held := svcSpec("held", "")
	held.Spec.ClusterIP = "10.96.0.11"
	_, err = svcs.Create(ctx, held, metav1.CreateOptions{})
	wantInvalid(t, err, "spec.clusterIPs", "provided IP is already allocated")
	if _, err := svcs.Patch(ctx, "fin", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("remove finalizer: %v", err)
	}
	createSvc(t, c, held)

	// Dual-stack requests are refused on this IPv4 cluster.
	ds := svcSpec("ds", "")
	ds.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	_, err = svcs.Create(ctx, ds, metav1.CreateOptions{})
	wantInvalid(t, err, "spec.ipFamilyPolicy", "not configured for dual-stack")
}

func TestServiceNodePortAllocation(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	ctx := ctxT(t)
	svcs := c.CoreV1().Services("default")

	np := createSvc(t, c, svcSpec("np", corev1.ServiceTypeNodePort, corev1.ServicePort{Name: "a", Port: 80}, corev1.ServicePort{Name: "b", Port: 81, NodePort: 30080}))
	if p := np.Spec.Ports[0].NodePort; p < 30000 || p > 32767 || p == 30080 {
		t.Fatalf("allocated node port %d", p)
	}
	if np.Spec.Ports[1].NodePort != 30080 {
		t.Fatalf("requested node port: %d", np.Spec.Ports[1].NodePort)
	}
	inRange(t, np.Spec.ClusterIP)
	if np.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster {
		t.Fatalf("externalTrafficPolicy = %q", np.Spec.ExternalTrafficPolicy)
	}

	taken := svcSpec("taken", corev1.ServiceTypeNodePort, corev1.ServicePort{Port: 80, NodePort: 30080})
	_, err := svcs.Create(ctx, taken, metav1.CreateOptions{})
	wantInvalid(t, err, "spec.ports[0].nodePort", "provided port is already allocated")
	outside := svcSpec("outside", corev1.ServiceTypeNodePort, corev1.ServicePort{Port: 80, NodePort: 8080})
	_, err = svcs.Create(ctx, outside, metav1.CreateOptions{})
	wantInvalid(t, err, "spec.ports[0].nodePort", "provided port is not in the valid range. The range of valid ports is 30000-32767")

	// Adding a port allocates one for it and keeps the others.
	cur, _ := svcs.Get(ctx, "np", metav1.GetOptions{})
	cur.Spec.Ports = append(cur.Spec.Ports, corev1.ServicePort{Name: "c", Port: 82})
	upd, err := svcs.Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil || upd.Spec.Ports[0].NodePort != np.Spec.Ports[0].NodePort || upd.Spec.Ports[2].NodePort == 0 {
		t.Fatalf("add port: %v %+v", err, upd.Spec.Ports)
	}
	third := int(upd.Spec.Ports[2].NodePort)

	// Back to ClusterIP releases the node ports (and needs no client change to them).
	upd, err = svcs.Patch(ctx, "np", types.MergePatchType, []byte(`{"spec":{"type":"ClusterIP"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("to ClusterIP: %v", err)
	}
	for _, p := range upd.Spec.Ports {
		if p.NodePort != 0 {
			t.Fatalf("node port kept after type ClusterIP: %+v", upd.Spec.Ports)
		}
	}
	if upd.Spec.ExternalTrafficPolicy != "" || upd.Spec.ClusterIP != np.Spec.ClusterIP {
		t.Fatalf("after type ClusterIP: %+v", upd.Spec)
	}
	reuse := svcSpec("reuse", corev1.ServiceTypeNodePort, corev1.ServicePort{Name: "a", Port: 80, NodePort: 30080}, corev1.ServicePort{Name: "b", Port: 81, NodePort: int32(third)})
	createSvc(t, c, reuse)

	// LoadBalancer behaves as NodePort with an empty status; Local gets a health check port.
	lb := svcSpec("lb", corev1.ServiceTypeLoadBalancer)
	lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	got := createSvc(t, c, lb)
	if got.Spec.Ports[0].NodePort == 0 || got.Spec.HealthCheckNodePort == 0 || got.Spec.HealthCheckNodePort == got.Spec.Ports[0].NodePort ||
		len(got.Status.LoadBalancer.Ingress) != 0 {
		t.Fatalf("LoadBalancer: %+v %+v", got.Spec, got.Status)
	}
	noPorts := svcSpec("lb-no-ports", corev1.ServiceTypeLoadBalancer)
	noPorts.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
	if got := createSvc(t, c, noPorts); got.Spec.Ports[0].NodePort != 0 {
		t.Fatalf("allocateLoadBalancerNodePorts=false got %+v", got.Spec.Ports)
	}

	// Deleting releases node ports and the health check port.
	if err := svcs.Delete(ctx, "lb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := svcSpec("again", corev1.ServiceTypeNodePort, corev1.ServicePort{Name: "a", Port: 80, NodePort: got.Spec.Ports[0].NodePort}, corev1.ServicePort{Name: "b", Port: 81, NodePort: got.Spec.HealthCheckNodePort})
	createSvc(t, c, again)

	// A dry run picks distinct ports without taking them.
	dry := svcSpec("dry", corev1.ServiceTypeNodePort, corev1.ServicePort{Name: "a", Port: 80}, corev1.ServicePort{Name: "b", Port: 81})
	d, err := svcs.Create(ctx, dry, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil || d.Spec.Ports[0].NodePort == 0 || d.Spec.Ports[0].NodePort == d.Spec.Ports[1].NodePort {
		t.Fatalf("dry run: %v %+v", err, d)
	}
	taken = svcSpec("after-dry", corev1.ServiceTypeNodePort, corev1.ServicePort{Name: "a", Port: 80, NodePort: d.Spec.Ports[0].NodePort}, corev1.ServicePort{Name: "b", Port: 81, NodePort: d.Spec.Ports[1].NodePort})
	createSvc(t, c, taken)

	// A failed create frees the node ports it took.
	bad := svcSpec("bad", corev1.ServiceTypeNodePort, corev1.ServicePort{Name: "a", Port: 80, NodePort: 31000}, corev1.ServicePort{Name: "a", Port: 81})
	if _, err := svcs.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("invalid create: %v", err)
	}
	createSvc(t, c, svcSpec("ok", corev1.ServiceTypeNodePort, corev1.ServicePort{Port: 80, NodePort: 31000}))
}

func TestKubernetesServiceEndpoints(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := ctxT(t)
	ep, err := env.Client.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		t.Skip("this machine has no default route: the kubernetes Service has no endpoints")
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 1 || len(ep.Subsets[0].Ports) != 1 || ep.Subsets[0].Ports[0].Name != "https" {
		t.Fatalf("endpoints = %+v", ep.Subsets)
	}
	port := ep.Subsets[0].Ports[0].Port
	if !strings.HasSuffix(env.Config.Host, ":"+itoa(int(port))) {
		t.Fatalf("endpoint port %d, server %s", port, env.Config.Host)
	}
	svc, err := env.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || svc.Spec.Ports[0].TargetPort.IntValue() != int(port) {
		t.Fatalf("kubernetes Service target port: %v %v", svc, err)
	}
	sl, err := env.Client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sl.Labels[discoveryv1.LabelServiceName] != "kubernetes" || sl.AddressType != discoveryv1.AddressTypeIPv4 || len(sl.Endpoints) != 1 ||
		sl.Endpoints[0].Addresses[0] != ep.Subsets[0].Addresses[0].IP || *sl.Ports[0].Port != port {
		t.Fatalf("endpointslice = %+v", sl)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestKubectlExposeAndGetSvc runs the real kubectl: expose a Deployment (ClusterIP and
// NodePort) and list the Services.
func TestKubectlExposeAndGetSvc(t *testing.T) {
	const kubectl = "/usr/bin/kubectl"
	if _, err := os.Stat(kubectl); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kubectl is required in CI: %v", err)
		}
		t.Skip("kubectl is not installed")
	}
	env := testenv.Start(t, testenv.Options{})
	home := filepath.Join(t.TempDir(), "home")
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", env.Kubeconfig, "-n", "default"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home, "KUBECACHEDIR="+filepath.Join(home, "cache"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("create", "deployment", "web", "--image=busybox:1.36", "--port=8080")
	run("expose", "deployment", "web", "--port=80", "--target-port=8080")
	run("expose", "deployment", "web", "--name=web-np", "--type=NodePort", "--port=80", "--target-port=8080")
	out := run("get", "svc")
	for _, re := range []string{
		`kubernetes\s+ClusterIP\s+10\.96\.0\.1\s+<none>\s+443/TCP`,
		`web\s+ClusterIP\s+10\.\d+\.\d+\.\d+\s+<none>\s+80/TCP`,
		`web-np\s+NodePort\s+10\.\d+\.\d+\.\d+\s+<none>\s+80:3\d{4}/TCP`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Fatalf("kubectl get svc printed\n%s\nwant a line matching %s", out, re)
		}
	}
	ip := strings.TrimSpace(run("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"))
	inRange(t, ip)
}
