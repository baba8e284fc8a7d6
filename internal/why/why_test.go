package why

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	goldenfile "github.com/kubette/kubette/internal/testenv/golden"
)

func node(name, cpu string, mutate ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("4Gi"),
				corev1.ResourcePods: resource.MustParse("110"),
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	n.Status.Capacity = n.Status.Allocatable
	for _, m := range mutate {
		m(n)
	}
	return n
}

func pod(name, cpu string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{
			SchedulerName: corev1.DefaultSchedulerName,
			Containers: []corev1.Container{{Name: "app", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func boundTo(n string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeName = n; p.Status.Phase = corev1.PodRunning }
}

func explain(t *testing.T, kind Kind, name string, objs ...runtime.Object) (*Report, string) {
	t.Helper()
	objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	client := fake.NewClientset(objs...)
	r, err := Explain(context.Background(), client, kind, "default", name)
	if err != nil {
		t.Fatalf("Explain: %v", err)
	}
	text := Text(r)
	if _, err := JSON(r); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	t.Log("\n" + text)
	return r, text
}

// update rewrites the golden files: go test ./internal/why -update

// golden compares text with testdata/NAME.golden.
func golden(t *testing.T, name, text string) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name+".golden"), []byte(text))
}

func wantLines(t *testing.T, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(text, l) {
			t.Errorf("output lacks %q", l)
		}
	}
}

func TestPendingInsufficientCPUNamesEveryNode(t *testing.T) {
	big := pod("big", "8", func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient cpu."}}
	})
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: "big.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "big", UID: big.UID},
		Reason:         "FailedScheduling", Type: "Warning", Message: "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod..",
		LastTimestamp: metav1.NewTime(time.Unix(100, 0)),
	}
	r, text := explain(t, KindPod, "big",
		node("node-1", "2"), node("node-2", "2"), node("node-3", "2"),
		pod("used", "1500m", boundTo("node-1")), pod("done", "1", boundTo("node-2"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		big, ev)
	golden(t, "pending-cpu", text)
	wantLines(t, text,
		"node-1: NodeResourcesFit: Insufficient cpu (requests 8, allocatable 2, in use 1.5)",
		"node-2: NodeResourcesFit: Insufficient cpu (requests 8, allocatable 2, in use 0)",
		"node-3: NodeResourcesFit: Insufficient cpu (requests 8, allocatable 2, in use 0)",
		"PodScheduled condition: Unschedulable: 0/3 nodes are available: 3 Insufficient cpu.",
		"last FailedScheduling event: 0/3 nodes are available: 3 Insufficient cpu. preemption",
	)
	if want := "pending: 0/3 nodes fit: 3 Insufficient cpu"; r.Summary != want {
		t.Errorf("summary %q, want %q", r.Summary, want)
	}
	if s := r.Pods[0].Scheduling; len(s.Nodes) != 3 || len(s.Fits) != 0 {
		t.Errorf("scheduling %+v", s)
	}
}

func TestPendingTaints(t *testing.T) {
	taint := func(key, value string) func(*corev1.Node) {
		return func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffectNoSchedule})
		}
	}
	_, text := explain(t, KindPod, "web",
		node("node-1", "2", taint("dedicated", "gpu")), node("node-2", "2", taint("team", "db")),
		pod("web", "100m"))
	wantLines(t, text,
		"node-1: TaintToleration: node(s) had untolerated taint {dedicated: gpu}",
		"node-2: TaintToleration: node(s) had untolerated taint {team: db}",
		"pending: 0/2 nodes fit: 1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) had untolerated taint {team: db}",
	)
}

func TestPendingNodeSelectorAndSeveralFilters(t *testing.T) {
	_, text := explain(t, KindPod, "web",
		node("node-1", "2"), node("node-2", "1", func(n *corev1.Node) { n.Labels["disk"] = "ssd" }),
		pod("web", "1500m", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }))
	wantLines(t, text,
		"node-1: NodeAffinity: node(s) didn't match Pod's node affinity/selector",
		"node-2: NodeResourcesFit: Insufficient cpu (requests 1.5, allocatable 1, in use 0)",
	)
	if strings.Contains(text, "node-1: NodeResourcesFit") {
		t.Error("node-1 has room: it should be rejected by NodeAffinity only")
	}
}

func TestPendingPodThatFits(t *testing.T) {
	r, text := explain(t, KindPod, "web",
		node("node-1", "2"), node("node-2", "1", func(n *corev1.Node) { n.Spec.Unschedulable = true }),
		pod("web", "1", func(p *corev1.Pod) { p.Spec.SchedulerName = "my-scheduler" }))
	wantLines(t, text,
		"node-1: fits",
		"node-2: NodeUnschedulable: node(s) were unschedulable",
		`pending: 1/2 nodes fit (node-1) but no scheduler has bound it yet: is the scheduler running, and does it serve schedulerName "my-scheduler"?`,
	)
	if got := r.Pods[0].Scheduling.Fits; len(got) != 1 || got[0] != "node-1" {
		t.Errorf("fits %v", got)
	}
}

func TestPendingCountsNominatedPods(t *testing.T) {
	prio := func(v int32, nominated string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.Priority = &v; p.Status.NominatedNodeName = nominated }
	}
	_, text := explain(t, KindPod, "web",
		node("node-1", "2"), node("node-2", "2"),
		pod("vip", "1500m", prio(100, "node-1")), pod("low", "1500m", prio(-5, "node-2")),
		pod("web", "1", prio(0, "")))
	wantLines(t, text,
		"node-1: NodeResourcesFit: Insufficient cpu (requests 1, allocatable 2, in use 1.5; counting default/vip, nominated for this node)",
		"node-2: fits",
	)
}

func TestCrashLoopBackOff(t *testing.T) {
	p := pod("web", "100m", boundTo("node-1"), func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "app", RestartCount: 4,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: "back-off 1m20s restarting failed container=app pod=web_default(uid)"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}},
		}}
	})
	r, text := explain(t, KindPod, "web", node("node-1", "2"), p)
	wantLines(t, text,
		"container app: waiting CrashLoopBackOff: back-off 1m20s restarting failed container=app pod=web_default(uid) (restarts 4)",
		"last run: exit code 3, Error",
		"| fake logs", // the fake clientset's pods/log answer
		"not ready: container app waiting (CrashLoopBackOff)",
	)
	if r.Pods[0].Ready {
		t.Error("pod reported ready")
	}
}

func TestPodOnMissingNode(t *testing.T) {
	_, text := explain(t, KindPod, "web", pod("web", "100m", boundTo("gone")))
	wantLines(t, text, "not ready: node gone does not exist; container app unknown")
}

func TestImagePullBackOff(t *testing.T) {
	p := pod("web", "100m", boundTo("node-1"), func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "app", Image: "registry.local/nope:1",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff",
				Message: `Back-off pulling image "registry.local/nope:1": manifest unknown: the registry says 404`}},
		}}
	})
	r, text := explain(t, KindPod, "web", node("node-1", "2"), p)
	wantLines(t, text,
		`container app: waiting ImagePullBackOff: Back-off pulling image "registry.local/nope:1": manifest unknown: the registry says 404`)
	if c := r.Pods[0].Containers; len(c) != 1 || c[0].Logs != nil {
		t.Errorf("containers %+v: an image that never ran has no logs to show", c)
	}
}

func TestReadinessProbeFailingAndGatesAndNode(t *testing.T) {
	p := pod("web", "100m", boundTo("node-1"), func(p *corev1.Pod) {
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb-ready"}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: false,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	})
	unhealthy := func(name, msg string, at int64) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: p.UID},
			Reason:         "Unhealthy", Type: "Warning", Message: msg, Count: 3, LastTimestamp: metav1.NewTime(time.Unix(at, 0)),
		}
	}
	notReady := func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status."}}
	}
	_, text := explain(t, KindPod, "web", node("node-1", "2", notReady), p,
		unhealthy("e2", "Readiness probe failed: HTTP probe failed with statuscode: 503", 200),
		unhealthy("e1", "Readiness probe failed: Get \"http://10.0.0.5:8080/\": connection refused", 100),
		unhealthy("e3", "Liveness probe failed: command exited 1", 150),
	)
	golden(t, "not-ready", text)
	wantLines(t, text,
		"container app: running not ready",
		"readiness probe: Readiness probe failed: HTTP probe failed with statuscode: 503 (×3)",
		"liveness probe: Liveness probe failed: command exited 1",
		"readiness gate example.com/lb-ready: condition not set",
		"node node-1 is NotReady (Ready=Unknown) NodeStatusUnknown Kubelet stopped posting node status.",
		"readiness probe failing",
	)
	if strings.Contains(text, "connection refused") {
		t.Error("an older readiness failure is shown instead of the latest")
	}
}

func TestServiceSelectorMismatchAndNamedPort(t *testing.T) {
	labeled := func(l map[string]string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Labels = l }
	}
	ready := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": "web", "tier": "front"},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP},
				{Name: "metrics", Port: 9090, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP},
			},
		},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	r, text := explain(t, KindService, "web", svc, slice, node("node-1", "2"),
		pod("web-1", "100m", boundTo("node-1"), labeled(map[string]string{"app": "web", "tier": "front"}), ready),
		pod("web-2", "100m", boundTo("node-1"), labeled(map[string]string{"app": "web", "tier": "front"}), func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
		}),
		pod("web-typo", "100m", boundTo("node-1"), labeled(map[string]string{"app": "web", "tier": "frontend"})),
		pod("db", "100m", boundTo("node-1"), labeled(map[string]string{"app": "db"})),
	)
	golden(t, "service", text)
	wantLines(t, text,
		"type: ClusterIP, ports: http 80→http/TCP, metrics 9090→metrics/TCP",
		"selector: app=web,tier=front",
		"matching pods: 2 (1 ready), pods missed: 2",
		`missed web-typo: tier: "frontend", want "front"`,
		`missed db: app: "db", want "web"; tier: missing (want "front")`,
		"not ready web-2: container app waiting (ImagePullBackOff)",
		`port 80: target port "http" (TCP) is not a named container port of pod(s) web-2`,
		`port 9090: target port "metrics" (TCP) is not a named container port of pod(s) web-1, web-2`,
		"endpoint slices: 1, ready endpoints: 0",
	)
	if i, j := strings.Index(text, "missed web-typo"), strings.Index(text, "missed db"); i > j {
		t.Error("the closest miss should come first")
	}
	if r.Service.Matched != 2 || r.Service.Ready != 1 || r.Service.MissedTotal != 2 {
		t.Errorf("service report %+v", r.Service)
	}
}

func TestServiceWithoutEndpointSlice(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}
	r, text := explain(t, KindService, "web", svc)
	wantLines(t, text, "no EndpointSlice yet", "matches none of the 0 pod(s)", "type: ClusterIP, ports: 80→8080/TCP")
	if r.Service.EndpointSlices != 0 {
		t.Errorf("slices %d", r.Service.EndpointSlices)
	}
}

func TestDeploymentExplainsItsPods(t *testing.T) {
	two := int32(2)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:       appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	app := func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} }
	r, text := explain(t, KindDeployment, "web", d, node("node-1", "2"),
		pod("web-a", "4", app), pod("web-b", "100m", app, boundTo("node-1"), func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}), pod("other", "4"))
	wantLines(t, text,
		"deployment default/web: 1/2 pod(s) ready (2 wanted)",
		"pod web-a: pending: 0/1 nodes fit: 1 Insufficient cpu",
		"    node-1: NodeResourcesFit: Insufficient cpu (requests 4, allocatable 2, in use 0.1)",
		"pod web-b: the pod is ready",
	)
	if len(r.Pods) != 2 {
		t.Errorf("%d pods explained, want 2", len(r.Pods))
	}
}

func TestParseKind(t *testing.T) {
	for in, want := range map[string]Kind{"po": KindPod, "pod": KindPod, "svc": KindService, "deploy": KindDeployment, "Deployment": KindDeployment} {
		if got, err := ParseKind(in); err != nil || got != want {
			t.Errorf("ParseKind(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseKind("node"); err == nil {
		t.Error("ParseKind(node) succeeded")
	}
}
