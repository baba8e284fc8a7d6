package kubelet

import (
	"context"
	"encoding/base64"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubette/kubette/internal/kubelet/cri"
)

var (
	_ RuntimeService = (*cri.Client)(nil)
	_ ImageService   = (*cri.Client)(nil)
)

// harness is a kubelet whose sync is called directly, over the CRI fakes and a fake clientset.
type harness struct {
	t        *testing.T
	k        *Kubelet
	rt       *critest.FakeRuntimeService
	images   *critest.FakeImageService
	client   *fake.Clientset
	recorder *record.FakeRecorder
	clock    *testingclock.FakeClock
	probes   *fakeProbes
	volumes  *fakeVolumes
	workers  map[types.UID]*podWorker
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	h := &harness{
		t: t, rt: critest.NewFakeRuntimeService(), images: critest.NewFakeImageService(),
		client: fake.NewClientset(objs...), recorder: record.NewFakeRecorder(1000),
		clock:  testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
		probes: &fakeProbes{ready: map[string]bool{}, started: map[string]bool{}}, volumes: &fakeVolumes{},
		workers: map[types.UID]*podWorker{},
	}
	dir := t.TempDir()
	k, err := New(Config{
		NodeName: testNode, Client: h.client, Runtime: h.rt, Images: h.images, Volumes: h.volumes, Probes: h.probes,
		RootDir: dir + "/kubelet", LogDir: dir + "/logs", Recorder: h.recorder, Clock: h.clock,
		ResolvConf: writeFile(t, dir+"/resolv.conf", "nameserver 10.0.0.10\nsearch example.org\noptions ndots:2\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.k = k
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}, Status: v1.NodeStatus{
		Addresses:   []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.1.2.3"}},
		Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110")},
		Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110")},
	}}
	if err := k.nodeInformer.GetIndexer().Add(node); err != nil {
		t.Fatal(err)
	}
	return h
}

// add puts a pod in the informer cache and the fake API.
func (h *harness) add(pod *v1.Pod) *v1.Pod {
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	if pod.UID == "" {
		pod.UID = types.UID("uid-" + pod.Name)
	}
	pod.Spec.NodeName = testNode
	if pod.Spec.RestartPolicy == "" {
		pod.Spec.RestartPolicy = v1.RestartPolicyAlways // as the API defaults it
	}
	if _, err := h.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.setPod(pod)
	return pod
}

// setPod replaces the informer's copy (as a watch event would).
func (h *harness) setPod(pod *v1.Pod) {
	if err := h.k.podInformer.GetIndexer().Update(pod); err != nil {
		h.t.Fatal(err)
	}
}

// sync runs one sync of the pod and then makes the informer see the status the kubelet wrote.
func (h *harness) sync(pod *v1.Pod) *v1.Pod {
	h.t.Helper()
	w := h.workers[pod.UID]
	if w == nil {
		w = &podWorker{uid: pod.UID, waiting: map[string]waitingReason{}}
		h.workers[pod.UID] = w
	}
	if _, err := h.k.syncPod(context.Background(), w); err != nil {
		h.t.Logf("sync: %v", err)
	}
	p, err := h.client.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	h.setPod(p)
	return p
}

func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (h *harness) container(pod *v1.Pod, name string) *critest.FakeContainer {
	h.rt.Lock()
	defer h.rt.Unlock()
	var best *critest.FakeContainer
	for _, c := range h.rt.Containers {
		if c.Labels[labelPodUID] == string(pod.UID) && c.Metadata.Name == name && (best == nil || c.Metadata.Attempt > best.Metadata.Attempt) {
			best = c
		}
	}
	return best
}

func (h *harness) exit(c *critest.FakeContainer, code int32) {
	h.rt.Lock()
	defer h.rt.Unlock()
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.ExitCode = code
	c.StartedAt = h.clock.Now().Add(-time.Second).UnixNano()
	c.FinishedAt = h.clock.Now().UnixNano()
}

func writeFile(t *testing.T, path, data string) string {
	t.Helper()
	if err := osWriteFile(path, data); err != nil {
		t.Fatal(err)
	}
	return path
}

type fakeProbes struct {
	results        chan ProbeResult
	ready, started map[string]bool
	updates        int
	removed        []types.UID
}

func (f *fakeProbes) Update(*v1.Pod, *v1.PodStatus) { f.updates++ }
func (f *fakeProbes) Remove(uid types.UID)          { f.removed = append(f.removed, uid) }
func (f *fakeProbes) Ready(_ types.UID, c string) bool {
	r, ok := f.ready[c]
	return !ok || r
}
func (f *fakeProbes) Started(_ types.UID, c string) bool {
	s, ok := f.started[c]
	return !ok || s
}
func (f *fakeProbes) Results() <-chan ProbeResult { return f.results }

type fakeVolumes struct {
	setups   int
	tornDown []types.UID
}

func (f *fakeVolumes) Setup(context.Context, *v1.Pod, v1.ResourceList) error {
	f.setups++
	return nil
}
func (f *fakeVolumes) Mounts(_ *v1.Pod, c *v1.Container) ([]*runtimeapi.Mount, error) {
	var m []*runtimeapi.Mount
	for _, vm := range c.VolumeMounts {
		m = append(m, &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: "/vol/" + vm.Name, Readonly: vm.ReadOnly})
	}
	return m, nil
}
func (f *fakeVolumes) TearDown(_ context.Context, uid types.UID) error {
	f.tornDown = append(f.tornDown, uid)
	return nil
}

func containerNamed(name, image string) v1.Container {
	return v1.Container{Name: name, Image: image, ImagePullPolicy: v1.PullIfNotPresent, TerminationMessagePath: "/dev/termination-log"}
}

func TestSyncStartsInitContainersInOrderThenApps(t *testing.T) {
	h := newHarness(t)
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		RestartPolicy:  v1.RestartPolicyAlways,
		InitContainers: []v1.Container{containerNamed("init1", "img:1"), containerNamed("init2", "img:1")},
		Containers:     []v1.Container{containerNamed("a", "img:1"), containerNamed("b", "img:2")},
	}})
	p := h.sync(pod)
	if h.container(pod, "init1") == nil || h.container(pod, "init2") != nil || h.container(pod, "a") != nil {
		t.Fatal("first sync should start init1 only")
	}
	if p.Status.Phase != v1.PodPending || p.Status.InitContainerStatuses[0].State.Running == nil ||
		p.Status.ContainerStatuses[0].State.Waiting.Reason != reasonPodInitializing {
		t.Fatalf("status after init1 started: %+v", p.Status)
	}
	h.sync(pod) // init1 still runs: nothing new
	if h.container(pod, "init2") != nil {
		t.Fatal("init2 started while init1 runs")
	}
	h.exit(h.container(pod, "init1"), 0)
	h.sync(pod)
	if h.container(pod, "init2") == nil || h.container(pod, "a") != nil {
		t.Fatal("init2 should start after init1 succeeded, and nothing else")
	}
	h.exit(h.container(pod, "init2"), 0)
	p = h.sync(pod)
	if h.container(pod, "a") == nil || h.container(pod, "b") == nil {
		t.Fatal("app containers should start after the init containers")
	}
	if p.Status.Phase != v1.PodRunning || !podCondition(p, v1.PodInitialized) || !podCondition(p, v1.PodReady) {
		t.Fatalf("status: %+v", p.Status)
	}
	if p.Status.InitContainerStatuses[0].State.Terminated == nil || p.Status.InitContainerStatuses[0].State.Terminated.Reason != "Completed" {
		t.Errorf("init status: %+v", p.Status.InitContainerStatuses[0])
	}
	ev := strings.Join(h.events(), "\n")
	for _, want := range []string{
		`Normal Pulling Pulling image "img:1"`, `Normal Pulled Successfully pulled image "img:1" in`,
		`Normal Pulled Container image "img:1" already present on machine`,
		"Normal Created Created container: init1", "Normal Started Started container init1",
	} {
		if !strings.Contains(ev, want) {
			t.Errorf("no event %q in\n%s", want, ev)
		}
	}
}

func podCondition(p *v1.Pod, t v1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func TestSyncFailedInitContainerWithRestartNeverFailsThePod(t *testing.T) {
	h := newHarness(t)
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		RestartPolicy:  v1.RestartPolicyNever,
		InitContainers: []v1.Container{containerNamed("init", "img")},
		Containers:     []v1.Container{containerNamed("a", "img")},
	}})
	h.sync(pod)
	h.exit(h.container(pod, "init"), 3)
	p := h.sync(pod)
	if p.Status.Phase != v1.PodFailed || h.container(pod, "a") != nil {
		t.Fatalf("phase %s, app started: %v", p.Status.Phase, h.container(pod, "a") != nil)
	}
	if t3 := p.Status.InitContainerStatuses[0].State.Terminated; t3 == nil || t3.ExitCode != 3 || t3.Reason != "Error" {
		t.Errorf("init status %+v", p.Status.InitContainerStatuses[0])
	}
	if h.rt.Sandboxes[h.container(pod, "init").SandboxID].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Error("the sandbox of a failed pod should be stopped")
	}
}

func TestSyncRestartPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy      v1.RestartPolicy
		code        int32
		restart     bool
		wantPhase   v1.PodPhase
		wantWaiting string
	}{
		{v1.RestartPolicyAlways, 0, true, v1.PodRunning, ""},
		{v1.RestartPolicyOnFailure, 1, true, v1.PodRunning, ""},
		{v1.RestartPolicyOnFailure, 0, false, v1.PodSucceeded, ""},
		{v1.RestartPolicyNever, 1, false, v1.PodFailed, ""},
		{v1.RestartPolicyNever, 0, false, v1.PodSucceeded, ""},
	} {
		t.Run(string(tc.policy)+"/"+string(rune('0'+tc.code)), func(t *testing.T) {
			h := newHarness(t)
			pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
				RestartPolicy: tc.policy, Containers: []v1.Container{containerNamed("a", "img")},
			}})
			h.sync(pod)
			first := h.container(pod, "a")
			h.exit(first, tc.code)
			p := h.sync(pod)
			restarted := h.container(pod, "a").Id != first.Id
			if restarted != tc.restart || p.Status.Phase != tc.wantPhase {
				t.Fatalf("restarted %v phase %s; want %v %s", restarted, p.Status.Phase, tc.restart, tc.wantPhase)
			}
			if restarted {
				cs := p.Status.ContainerStatuses[0]
				if cs.RestartCount != 1 || cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != tc.code {
					t.Errorf("status after restart: %+v", cs)
				}
				if h.container(pod, "a").Annotations[annotationRestartCount] != "1" || h.container(pod, "a").Metadata.Attempt != 1 {
					t.Errorf("restarted container: %v %v", h.container(pod, "a").Annotations, h.container(pod, "a").Metadata)
				}
			}
		})
	}
}

func TestSyncCrashLoopBackOff(t *testing.T) {
	h := newHarness(t)
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		Containers: []v1.Container{containerNamed("a", "img")},
	}})
	h.sync(pod)
	h.exit(h.container(pod, "a"), 1)
	h.sync(pod) // first restart at once
	if h.container(pod, "a").Metadata.Attempt != 1 {
		t.Fatal("not restarted")
	}
	for i, want := range []string{"10s", "20s", "40s", "1m20s", "2m40s", "5m0s", "5m0s"} {
		h.exit(h.container(pod, "a"), 1)
		p := h.sync(pod)
		cs := p.Status.ContainerStatuses[0]
		if cs.State.Waiting == nil || cs.State.Waiting.Reason != reasonCrashLoopBackOff ||
			cs.State.Waiting.Message != "back-off "+want+" restarting failed container=a pod=p_default(uid-p)" {
			t.Fatalf("crash %d: %+v", i, cs.State)
		}
		if p.Status.Phase != v1.PodRunning || cs.LastTerminationState.Terminated == nil {
			t.Fatalf("crash %d: phase %s, last %+v", i, p.Status.Phase, cs.LastTerminationState)
		}
		d, _ := time.ParseDuration(want)
		h.clock.Step(d - time.Millisecond)
		h.sync(pod)
		if n := h.container(pod, "a").Metadata.Attempt; n != uint32(i+1) {
			t.Fatalf("restarted before the back-off passed (attempt %d)", n)
		}
		h.clock.Step(2 * time.Millisecond)
		h.sync(pod)
		if n := h.container(pod, "a").Metadata.Attempt; n != uint32(i+2) {
			t.Fatalf("not restarted after the back-off (attempt %d)", n)
		}
	}
	if !strings.Contains(strings.Join(h.events(), "\n"), "Warning BackOff Back-off restarting failed container a in pod p_default(uid-p)") {
		t.Error("no BackOff event")
	}
	// Ten minutes of running resets the back-off.
	h.clock.Step(11 * time.Minute)
	h.exit(h.container(pod, "a"), 1)
	attempt := h.container(pod, "a").Metadata.Attempt
	h.sync(pod)
	if h.container(pod, "a").Metadata.Attempt != attempt+1 {
		t.Fatal("a container that ran for 11 minutes should restart at once")
	}
}

func TestSyncImagePulls(t *testing.T) {
	h := newHarness(t)
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{
		{Name: "never", Image: "absent:1", ImagePullPolicy: v1.PullNever},
		{Name: "bad", Image: "broken:1", ImagePullPolicy: v1.PullAlways},
	}}})
	h.images.InjectError("PullImage", errString("manifest unknown"))
	p := h.sync(pod)
	st := map[string]*v1.ContainerStateWaiting{}
	for _, cs := range p.Status.ContainerStatuses {
		st[cs.Name] = cs.State.Waiting
	}
	if st["never"] == nil || st["never"].Reason != reasonErrImageNeverPull || st["never"].Message != `Container image "absent:1" is not present with pull policy of Never` {
		t.Errorf("never: %+v", st["never"])
	}
	if st["bad"] == nil || st["bad"].Reason != reasonErrImagePull || st["bad"].Message != "manifest unknown" {
		t.Errorf("bad: %+v", st["bad"])
	}
	p = h.sync(pod)
	if w := p.Status.ContainerStatuses[1].State.Waiting; w == nil || w.Reason != reasonImagePullBackOff || w.Message != `Back-off pulling image "broken:1"` {
		t.Errorf("bad after a failed pull: %+v", w)
	}
	ev := strings.Join(h.events(), "\n")
	for _, want := range []string{
		`Warning Failed Failed to pull image "broken:1": manifest unknown`, "Warning Failed Error: ErrImagePull",
		`Normal BackOff Back-off pulling image "broken:1"`, `Warning ErrImageNeverPull Container image "absent:1" is not present with pull policy of Never`,
	} {
		if !strings.Contains(ev, want) {
			t.Errorf("no event %q in\n%s", want, ev)
		}
	}
	h.clock.Step(11 * time.Second)
	p = h.sync(pod)
	if cs := p.Status.ContainerStatuses[1]; cs.State.Running == nil {
		t.Errorf("bad after the back-off: %+v", cs.State)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestSyncLivenessFailureRestarts(t *testing.T) {
	h := newHarness(t)
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{containerNamed("a", "img")}}})
	h.sync(pod)
	first := h.container(pod, "a")
	h.k.probeKills[first.Id] = ProbeLiveness
	h.sync(pod) // kills it
	if h.container(pod, "a").State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatal("liveness failure did not stop the container")
	}
	h.sync(pod) // restarts it
	if c := h.container(pod, "a"); c.Id == first.Id || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatal("not restarted after the liveness failure")
	}
	if ev := strings.Join(h.events(), "\n"); !strings.Contains(ev, "Normal Killing Container a failed liveness probe, will be restarted") {
		t.Errorf("events:\n%s", ev)
	}
	if h.probes.updates == 0 {
		t.Error("probes never updated")
	}
}

func TestSyncReadinessFromProbes(t *testing.T) {
	h := newHarness(t)
	h.probes.ready["a"] = false
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{containerNamed("a", "img")}}})
	p := h.sync(pod)
	if p.Status.Phase != v1.PodRunning || podCondition(p, v1.PodReady) || p.Status.ContainerStatuses[0].Ready {
		t.Fatalf("status: %+v", p.Status)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.ContainersReady && (c.Reason != "ContainersNotReady" || c.Message != "containers with unready status: [a]") {
			t.Errorf("condition %+v", c)
		}
	}
	h.probes.ready["a"] = true
	if p = h.sync(pod); !podCondition(p, v1.PodReady) {
		t.Fatalf("not ready after the probe passed: %+v", p.Status.Conditions)
	}
}

func TestSyncContainerConfig(t *testing.T) {
	optional := true
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default"}, Data: map[string]string{"K1": "v1", "K2": "$(GREETING)"}}
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}, Data: map[string][]byte{"pw": []byte("hunter2")}}
	h := newHarness(t, cm, sec)
	uid, gid, priv, ro := int64(1000), int64(2000), true, true
	grace := int64(7)
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"note": "y"}}, Spec: v1.PodSpec{
		TerminationGracePeriodSeconds: &grace,
		ServiceAccountName:            "sa",
		Containers: []v1.Container{{
			Name: "a", Image: "img:1", ImagePullPolicy: v1.PullIfNotPresent,
			Command:    []string{"/bin/$(CMD)"},
			Args:       []string{"$(GREETING)", "$$(GREETING)", "$(MISSING)"},
			WorkingDir: "/work",
			Ports:      []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}},
			EnvFrom:    []v1.EnvFromSource{{Prefix: "CM_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}},
			Env: []v1.EnvVar{
				{Name: "CMD", Value: "sh"},
				{Name: "GREETING", Value: "hello $(CMD)"},
				{Name: "NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "APP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
				{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
				{Name: "SA", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}},
				{Name: "HOST_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
				{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				{Name: "MEM", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
				{Name: "CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: resource.MustParse("1m")}}},
				{Name: "PW", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "pw"}}},
				{Name: "OPT", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Key: "k", Optional: &optional}}},
			},
			VolumeMounts:           []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
			TerminationMessagePath: "/dev/termination-log",
			Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("128Mi")},
			},
			SecurityContext: &v1.SecurityContext{
				RunAsUser: &uid, RunAsGroup: &gid, Privileged: &priv, ReadOnlyRootFilesystem: &ro,
				Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}},
			},
		}},
	}})
	p := h.sync(pod)
	c := h.container(pod, "a")
	if c == nil {
		t.Fatalf("not started: %+v", p.Status)
	}
	h.rt.Lock()
	sb := h.rt.Sandboxes[c.SandboxID]
	h.rt.Unlock()
	if sb.Labels["app"] != "x" || sb.Annotations["note"] != "y" || sb.Labels[labelPodUID] != "uid-p" {
		t.Errorf("sandbox labels %v annotations %v", sb.Labels, sb.Annotations)
	}
	if c.Labels[labelContainerName] != "a" || c.Annotations[annotationPodGracePeriod] != "7" || c.Annotations[annotationTerminationMessagePath] != "/dev/termination-log" {
		t.Errorf("container labels %v annotations %v", c.Labels, c.Annotations)
	}
	if r := c.LinuxResources; r.CpuShares != 256 || r.CpuQuota != 50000 || r.CpuPeriod != 100000 || r.MemoryLimitInBytes != 128<<20 {
		t.Errorf("resources %+v", r)
	}
	if p.Status.QOSClass != v1.PodQOSBurstable {
		t.Errorf("qos %s", p.Status.QOSClass)
	}
	if p.Status.PodIP != critest.FakePodSandboxIPs[0] || p.Status.HostIP != "10.1.2.3" {
		t.Errorf("IPs: %s %s", p.Status.PodIP, p.Status.HostIP)
	}
	if h.volumes.setups == 0 {
		t.Error("volumes never set up")
	}
}

func TestContainerConfigDetails(t *testing.T) {
	uid, gid, priv, ro := int64(1000), int64(2000), true, true
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}, Spec: v1.PodSpec{Containers: []v1.Container{{
		Name: "a", Image: "img", Command: []string{"/bin/$(CMD)"}, Args: []string{"$(X)", "$$(X)", "$(MISSING)", "$(X"},
		WorkingDir: "/w",
		SecurityContext: &v1.SecurityContext{
			RunAsUser: &uid, RunAsGroup: &gid, Privileged: &priv, ReadOnlyRootFilesystem: &ro,
			Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}},
		},
	}}}}
	env := []v1.EnvVar{{Name: "CMD", Value: "sh"}, {Name: "X", Value: "x"}}
	mounts := []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/vol/data"}}
	cfg := containerConfig(pod, &pod.Spec.Containers[0], 3, "sha256:abc", env, mounts, 0)
	if strings.Join(cfg.Command, " ") != "/bin/sh" || strings.Join(cfg.Args, "|") != "x|$(X)|$(MISSING)|$(X" {
		t.Errorf("command %q args %q", cfg.Command, cfg.Args)
	}
	if cfg.Metadata.Attempt != 3 || cfg.LogPath != "a/3.log" || cfg.Image.Image != "sha256:abc" || cfg.Image.UserSpecifiedImage != "img" || cfg.WorkingDir != "/w" || len(cfg.Mounts) != 1 {
		t.Errorf("config %v", cfg)
	}
	sc := cfg.Linux.SecurityContext
	if sc.RunAsUser.Value != 1000 || sc.RunAsGroup.Value != 2000 || !sc.Privileged || !sc.ReadonlyRootfs ||
		strings.Join(sc.Capabilities.AddCapabilities, ",") != "CAP_NET_ADMIN" || strings.Join(sc.Capabilities.DropCapabilities, ",") != "ALL" {
		t.Errorf("security context %v", sc)
	}
	if cfg.Linux.Resources.CpuShares != 2 || cfg.Linux.Resources.OomScoreAdj != 1000 {
		t.Errorf("best-effort resources %v", cfg.Linux.Resources)
	}
	if cfg.Annotations[annotationRestartCount] != "3" || cfg.Labels[labelPodName] != "p" || cfg.Labels[labelPodNamespace] != "ns" {
		t.Errorf("labels %v annotations %v", cfg.Labels, cfg.Annotations)
	}
}

func TestSandboxConfig(t *testing.T) {
	dns := parseResolvConf([]byte("# c\nnameserver 1.1.1.1\nnameserver 8.8.8.8\nsearch a.b c.d\noptions ndots:5 edns0\n"))
	if strings.Join(dns.Servers, ",") != "1.1.1.1,8.8.8.8" || strings.Join(dns.Searches, ",") != "a.b,c.d" || strings.Join(dns.Options, ",") != "ndots:5,edns0" {
		t.Fatalf("dns %v", dns)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"}, Spec: v1.PodSpec{
		Hostname: "h1",
		Containers: []v1.Container{{Name: "a", Ports: []v1.ContainerPort{
			{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}, {ContainerPort: 53, HostPort: 5353, Protocol: v1.ProtocolUDP, HostIP: "127.0.0.1"}, {ContainerPort: 9090},
		}}},
	}}
	cfg := sandboxConfig(pod, 2, "/logs", dns, "h1")
	if cfg.Hostname != "h1" || cfg.LogDirectory != "/logs/ns_web_u1" || cfg.Metadata.Attempt != 2 || cfg.Linux.CgroupParent != "/kubette/podu1" {
		t.Errorf("config %v", cfg)
	}
	if len(cfg.PortMappings) != 2 || cfg.PortMappings[1].Protocol != runtimeapi.Protocol_UDP || cfg.PortMappings[1].HostIp != "127.0.0.1" || cfg.PortMappings[0].HostPort != 8080 {
		t.Errorf("ports %v", cfg.PortMappings)
	}
	if cfg.Linux.SecurityContext.NamespaceOptions.Network != runtimeapi.NamespaceMode_POD {
		t.Error("pod network expected")
	}
	pod.Spec.HostNetwork = true
	cfg = sandboxConfig(pod, 0, "/logs", dns, "h1")
	if cfg.Hostname != "" || cfg.Linux.SecurityContext.NamespaceOptions.Network != runtimeapi.NamespaceMode_NODE {
		t.Errorf("host network: %v", cfg)
	}
}

func TestGracefulDeletionUnit(t *testing.T) {
	h := newHarness(t)
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{containerNamed("a", "img")}}})
	h.sync(pod)
	p, _ := h.client.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{})
	now := metav1.NewTime(h.clock.Now())
	grace := int64(5)
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	h.setPod(p)
	h.sync(p)
	if _, err := h.client.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{}); err == nil {
		t.Fatal("pod object not deleted")
	}
	var deleted bool
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "delete" {
			deleted = true
		}
	}
	if !deleted || len(h.rt.Containers) != 0 || len(h.rt.Sandboxes) != 0 {
		t.Fatalf("deleted %v, runtime %d/%d", deleted, len(h.rt.Containers), len(h.rt.Sandboxes))
	}
	if len(h.volumes.tornDown) != 1 || len(h.probes.removed) != 1 {
		t.Errorf("teardown %v probes removed %v", h.volumes.tornDown, h.probes.removed)
	}
	// The informer's delete event: the worker is done.
	if err := h.k.podInformer.GetIndexer().Delete(p); err != nil {
		t.Fatal(err)
	}
	done, err := h.k.syncPod(context.Background(), h.workers[p.UID])
	if !done || err != nil {
		t.Fatalf("done %v err %v", done, err)
	}
}

func TestGetPhase(t *testing.T) {
	run := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	ok := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}
	bad := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
	wait := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	yes := true
	always := v1.ContainerRestartPolicyAlways
	st := func(name string, s v1.ContainerState, last ...v1.ContainerState) v1.ContainerStatus {
		cs := v1.ContainerStatus{Name: name, State: s, Started: &yes}
		if len(last) > 0 {
			cs.LastTerminationState = last[0]
		}
		return cs
	}
	podWith := func(policy v1.RestartPolicy, init []v1.Container, names ...string) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{RestartPolicy: policy, InitContainers: init}}
		for _, n := range names {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n})
		}
		return p
	}
	for i, tc := range []struct {
		pod      *v1.Pod
		statuses []v1.ContainerStatus
		terminal bool
		want     v1.PodPhase
	}{
		{podWith(v1.RestartPolicyAlways, nil, "a"), nil, false, v1.PodPending},
		{podWith(v1.RestartPolicyAlways, nil, "a"), []v1.ContainerStatus{st("a", wait)}, false, v1.PodPending},
		{podWith(v1.RestartPolicyAlways, nil, "a", "b"), []v1.ContainerStatus{st("a", run), st("b", wait)}, false, v1.PodPending},
		{podWith(v1.RestartPolicyAlways, nil, "a", "b"), []v1.ContainerStatus{st("a", run), st("b", bad)}, false, v1.PodRunning},
		{podWith(v1.RestartPolicyAlways, nil, "a"), []v1.ContainerStatus{st("a", bad)}, false, v1.PodRunning},
		{podWith(v1.RestartPolicyAlways, nil, "a"), []v1.ContainerStatus{st("a", bad)}, true, v1.PodFailed},
		{podWith(v1.RestartPolicyAlways, nil, "a"), []v1.ContainerStatus{st("a", ok)}, true, v1.PodSucceeded},
		{podWith(v1.RestartPolicyOnFailure, nil, "a"), []v1.ContainerStatus{st("a", ok)}, false, v1.PodSucceeded},
		{podWith(v1.RestartPolicyOnFailure, nil, "a"), []v1.ContainerStatus{st("a", bad)}, false, v1.PodRunning},
		{podWith(v1.RestartPolicyNever, nil, "a", "b"), []v1.ContainerStatus{st("a", ok), st("b", bad)}, false, v1.PodFailed},
		{podWith(v1.RestartPolicyAlways, nil, "a"), []v1.ContainerStatus{st("a", wait, bad)}, false, v1.PodRunning}, // CrashLoopBackOff
		{podWith(v1.RestartPolicyNever, []v1.Container{{Name: "i"}}, "a"), []v1.ContainerStatus{st("i", bad), st("a", wait)}, false, v1.PodFailed},
		{podWith(v1.RestartPolicyAlways, []v1.Container{{Name: "i"}}, "a"), []v1.ContainerStatus{st("i", run), st("a", wait)}, false, v1.PodPending},
		{podWith(v1.RestartPolicyAlways, []v1.Container{{Name: "i"}}, "a"), []v1.ContainerStatus{st("i", wait, bad), st("a", wait)}, false, v1.PodPending},
		{podWith(v1.RestartPolicyAlways, []v1.Container{{Name: "s", RestartPolicy: &always}}, "a"), []v1.ContainerStatus{st("s", run), st("a", run)}, false, v1.PodRunning},
		{podWith(v1.RestartPolicyNever, []v1.Container{{Name: "s", RestartPolicy: &always}}, "a"), []v1.ContainerStatus{st("s", run), st("a", ok)}, false, v1.PodRunning},
		{podWith(v1.RestartPolicyNever, []v1.Container{{Name: "s", RestartPolicy: &always}}, "a"), []v1.ContainerStatus{st("s", bad), st("a", ok)}, false, v1.PodSucceeded},
	} {
		if got := getPhase(tc.pod, tc.statuses, tc.terminal); got != tc.want {
			t.Errorf("case %d: phase %s, want %s", i, got, tc.want)
		}
	}
}

func TestContainerEnv(t *testing.T) {
	f := false
	objs := []runtime.Object{
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}, Data: map[string]string{"B": "b", "A": "a", "REF": "$(X)"}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Data: map[string][]byte{"k": []byte("secret")}},
	}
	client := fake.NewClientset(objs...)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", Labels: map[string]string{"b": "2", "a": "1"}},
		Spec: v1.PodSpec{NodeName: "n", ServiceAccountName: "sa"}}
	c := &v1.Container{
		Name:    "c",
		EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}, {Prefix: "S_", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}}},
		Env: []v1.EnvVar{
			{Name: "X", Value: "x"},
			{Name: "Y", Value: "$(X)-$(A)-$(Z)"},
			{Name: "A", Value: "override"},
			{Name: "LABELS", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}},
			{Name: "UID", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
			{Name: "IPS", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIPs"}}},
			{Name: "CPU_LIMIT", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
		},
	}
	in := envInputs{client: client, podIPs: []string{"10.0.0.5", "fd00::5"}, hostIPs: []string{"10.1.1.1"},
		allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3500m")}}
	env, err := containerEnv(context.Background(), in, pod, c)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range env {
		got = append(got, e.Name+"="+e.Value)
	}
	want := "A=override|B=b|REF=$(X)|S_k=secret|X=x|Y=x-a-$(Z)|LABELS=a=\"1\"\nb=\"2\"|UID=u|IPS=10.0.0.5,fd00::5|CPU_LIMIT=4"
	if strings.Join(got, "|") != want {
		t.Errorf("env\n got %q\nwant %q", strings.Join(got, "|"), want)
	}
	// A missing non-optional source is an error; an optional one is skipped.
	c2 := &v1.Container{Name: "c", Env: []v1.EnvVar{{Name: "M", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Key: "k", Optional: &f}}}}}
	if _, err := containerEnv(context.Background(), in, pod, c2); err == nil {
		t.Error("missing secret: no error")
	}
	c3 := &v1.Container{Name: "c", Env: []v1.EnvVar{{Name: "M", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Key: "nokey"}}}}}
	if _, err := containerEnv(context.Background(), in, pod, c3); err == nil || !strings.Contains(err.Error(), "couldn't find key nokey in ConfigMap ns/cm") {
		t.Errorf("missing key: %v", err)
	}
}

func TestQOSClass(t *testing.T) {
	res := func(req, lim string) v1.ResourceRequirements {
		r := v1.ResourceRequirements{}
		if req != "" {
			r.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(req), v1.ResourceMemory: resource.MustParse(req + "Mi")}
		}
		if lim != "" {
			r.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse(lim), v1.ResourceMemory: resource.MustParse(lim + "Mi")}
		}
		return r
	}
	for _, tc := range []struct {
		r    v1.ResourceRequirements
		want v1.PodQOSClass
	}{
		{res("", ""), v1.PodQOSBestEffort},
		{res("1", "1"), v1.PodQOSGuaranteed},
		{res("", "1"), v1.PodQOSGuaranteed},
		{res("1", "2"), v1.PodQOSBurstable},
		{res("1", ""), v1.PodQOSBurstable},
	} {
		pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Resources: tc.r}}}}
		if got := qosClass(pod); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.r, got, tc.want)
		}
	}
}

func TestPullPolicyDefault(t *testing.T) {
	for img, want := range map[string]v1.PullPolicy{
		"busybox": v1.PullAlways, "busybox:latest": v1.PullAlways, "busybox:1.36": v1.PullIfNotPresent,
		"localhost:5000/app": v1.PullAlways, "localhost:5000/app:v1": v1.PullIfNotPresent, "app@sha256:abc": v1.PullIfNotPresent,
	} {
		if got := pullPolicy(&v1.Container{Image: img}); got != want {
			t.Errorf("%s: %s, want %s", img, got, want)
		}
	}
}

func TestPullSecrets(t *testing.T) {
	cfgJSON := `{"auths":{"https://index.docker.io/v1/":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("hub:pw")) + `"},` +
		`"localhost:5000":{"username":"u","password":"p"},"localhost:5000/team":{"username":"team","password":"tp"}}}`
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "reg", Namespace: "default"}, Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(cfgJSON)}}
	h := newHarness(t, sec)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: v1.PodSpec{
		ImagePullSecrets: []v1.LocalObjectReference{{Name: "reg"}, {Name: "missing"}},
	}}
	users := func(image string) string {
		var u []string
		for _, a := range h.k.pullAuths(context.Background(), pod, image) {
			u = append(u, a.Username+":"+a.Password)
		}
		return strings.Join(u, ",")
	}
	for image, want := range map[string]string{
		"busybox":                          "hub:pw",
		"docker.io/library/busybox:1":      "hub:pw",
		"localhost:5000/app:v1":            "u:p",
		"localhost:5000/team/app@sha256:1": "team:tp,u:p",
		"localhost:5001/app":               "",
		"quay.io/x/y":                      "",
	} {
		if got := users(image); got != want {
			t.Errorf("%s: %q, want %q", image, got, want)
		}
	}
}

func TestSandboxRecreatedWhenItDies(t *testing.T) {
	h := newHarness(t)
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{containerNamed("a", "img")}}})
	h.sync(pod)
	first := h.container(pod, "a")
	h.rt.Lock()
	h.rt.Sandboxes[first.SandboxID].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	h.rt.Unlock()
	p := h.sync(pod)
	c := h.container(pod, "a")
	if c.SandboxID == first.SandboxID || c.Metadata.Attempt != 1 || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("after the sandbox died: container %s attempt %d in %s", c.Id, c.Metadata.Attempt, c.SandboxID)
	}
	h.rt.Lock()
	attempt := h.rt.Sandboxes[c.SandboxID].Metadata.Attempt
	h.rt.Unlock()
	if attempt != 1 || p.Status.ContainerStatuses[0].RestartCount != 1 {
		t.Errorf("sandbox attempt %d, restart count %d", attempt, p.Status.ContainerStatuses[0].RestartCount)
	}
}

func TestSidecarsStopWhenTheAppsComplete(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	h := newHarness(t)
	side := containerNamed("side", "img")
	side.RestartPolicy = &always
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		RestartPolicy:  v1.RestartPolicyNever,
		InitContainers: []v1.Container{side},
		Containers:     []v1.Container{containerNamed("a", "img")},
	}})
	h.sync(pod)
	if h.container(pod, "side") == nil || h.container(pod, "a") != nil {
		t.Fatal("the sidecar starts first, alone")
	}
	p := h.sync(pod)
	if h.container(pod, "a") == nil || p.Status.Phase != v1.PodRunning {
		t.Fatalf("the app starts once the sidecar started; phase %s", p.Status.Phase)
	}
	// A sidecar that exits is restarted even under restartPolicy Never.
	h.exit(h.container(pod, "side"), 1)
	h.sync(pod)
	if h.container(pod, "side").Metadata.Attempt != 1 {
		t.Fatal("sidecar not restarted")
	}
	h.exit(h.container(pod, "a"), 0)
	p = h.sync(pod)
	if h.container(pod, "side").State != runtimeapi.ContainerState_CONTAINER_EXITED || p.Status.Phase != v1.PodSucceeded {
		t.Fatalf("sidecar %s, phase %s", h.container(pod, "side").State, p.Status.Phase)
	}
}

func TestNothingStartsBeforeTheNodeIsRegistered(t *testing.T) {
	h := newHarness(t)
	node, _, _ := h.k.nodeInformer.GetIndexer().GetByKey(testNode)
	if err := h.k.nodeInformer.GetIndexer().Delete(node); err != nil {
		t.Fatal(err)
	}
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{containerNamed("a", "img")}}})
	w := &podWorker{uid: pod.UID, waiting: map[string]waitingReason{}}
	if _, err := h.k.syncPod(context.Background(), w); err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("sync without a node: %v", err)
	}
	if len(h.rt.Sandboxes) != 0 {
		t.Fatal("a sandbox was created before the node was registered")
	}
}

func TestTerminationMessages(t *testing.T) {
	h := newHarness(t)
	fromFile := containerNamed("file", "img")
	fromLogs := containerNamed("logs", "img")
	fromLogs.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{fromFile, fromLogs},
	}})
	h.sync(pod)
	// The container writes its termination message into the mounted file.
	hostPath := h.k.terminationLogPath(pod.UID, "file", 0)
	if st, err := os.Stat(hostPath); err != nil || st.Mode().Perm() != 0o666 {
		t.Fatalf("termination log file: %v", err)
	}
	writeFile(t, hostPath, "done for good")
	logDir := filepath.Join(h.k.cfg.LogDir, "default_p_uid-p", "logs")
	if _, err := os.Stat(logDir); err != nil {
		t.Fatalf("container log directory: %v", err)
	}
	writeFile(t, filepath.Join(logDir, "0.log"), "2026-01-01T00:00:00Z stderr F panic: boom\n")
	h.exit(h.container(pod, "file"), 0)
	h.exit(h.container(pod, "logs"), 2)
	p := h.sync(pod)
	if m := p.Status.ContainerStatuses[0].State.Terminated.Message; m != "done for good" {
		t.Errorf("file message %q", m)
	}
	if m := p.Status.ContainerStatuses[1].State.Terminated.Message; m != "panic: boom\n" {
		t.Errorf("logs message %q", m)
	}
	if p.Status.Phase != v1.PodFailed {
		t.Errorf("phase %s", p.Status.Phase)
	}
}

func TestUnchangedStatusIsNotWrittenAgain(t *testing.T) {
	h := newHarness(t)
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{containerNamed("a", "img")}}})
	h.clock.Step(1234567 * time.Microsecond) // times with sub-second parts
	h.sync(pod)
	h.sync(pod)
	h.client.ClearActions()
	h.clock.Step(time.Second)
	h.sync(pod)
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			t.Fatalf("status written again without a change")
		}
	}
}

func TestProbeResultsMarkLivenessFailures(t *testing.T) {
	h := newHarness(t)
	results := make(chan ProbeResult)
	h.probes.results = results
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.k.probeLoop(ctx) }()
	results <- ProbeResult{UID: "u", Container: "a", ContainerID: "abc", Kind: ProbeReadiness, Success: false}
	results <- ProbeResult{UID: "u", Container: "a", ContainerID: "kubette://def", Kind: ProbeLiveness, Success: false}
	results <- ProbeResult{UID: "u", Container: "a", ContainerID: "ghi", Kind: ProbeLiveness, Success: true}
	results <- ProbeResult{UID: "u", Container: "b", ContainerID: "jkl", Kind: ProbeStartup, Success: false}
	cancel()
	<-done
	h.k.mu.Lock()
	defer h.k.mu.Unlock()
	if want := map[string]string{"def": ProbeLiveness, "jkl": ProbeStartup}; !maps.Equal(h.k.probeKills, want) {
		t.Errorf("probe failures: %v, want %v", h.k.probeKills, want)
	}
}
