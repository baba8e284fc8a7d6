package volumebinding

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

const (
	wffc      = storagev1.VolumeBindingWaitForFirstConsumer
	immediate = storagev1.VolumeBindingImmediate
)

func unresolvable(reasons ...string) *framework.Status {
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, reasons...)
}

func TestPreFilter(t *testing.T) {
	deleting := claim("deleting", "local", "1Gi")
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	deleting.Finalizers = []string{"kubernetes.io/pvc-protection"}
	lost := claim("lost", "local", "1Gi")
	lost.Spec.VolumeName = "gone"
	lost.Status.Phase = corev1.ClaimLost
	prebound := claim("prebound", "local", "1Gi")
	prebound.Spec.VolumeName = "pv-x"
	ephemeralPod := pod("eph")
	ephemeralPod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
	notOwned := claim("eph2-scratch", "local", "1Gi")
	ephemeralPod2 := pod("eph2")
	ephemeralPod2.Spec.Volumes = ephemeralPod.Spec.Volumes
	e := newEnv(t, nil,
		class("local", "kubernetes.io/no-provisioner", wffc), class("fast", "example.com/csi", immediate),
		deleting, lost, prebound, claim("unbound-fast", "fast", "1Gi"), claim("waits", "local", "1Gi"),
		boundClaim("bound-fast", "fast", "1Gi", "pv-b"), notOwned,
		claim("unknown-class", "nosuchclass", "1Gi"))
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want *framework.Status
	}{
		{"no claims: skip", pod("p"), framework.NewStatus(framework.Skip)},
		{"missing claim", pod("p", "missing"), unresolvable(`persistentvolumeclaim "missing" not found`)},
		{"claim being deleted", pod("p", "deleting"), unresolvable(`persistentvolumeclaim "deleting" is being deleted`)},
		{"lost claim", pod("p", "lost"), unresolvable(`persistentvolumeclaim "lost" bound to non-existent persistentvolume "gone"`)},
		{"unbound immediate claim", pod("p", "unbound-fast"), unresolvable("pod has unbound immediate PersistentVolumeClaims")},
		{"a claim naming its volume counts as immediate", pod("p", "prebound"), unresolvable("pod has unbound immediate PersistentVolumeClaims")},
		{"a claim of a missing class counts as immediate", pod("p", "unknown-class"), unresolvable("pod has unbound immediate PersistentVolumeClaims")},
		{"WaitForFirstConsumer and bound claims", pod("p", "waits", "bound-fast"), nil},
		{"ephemeral claim not created yet", ephemeralPod, unresolvable(`waiting for ephemeral volume controller to create the persistentvolumeclaim "eph-scratch"`)},
		{"ephemeral claim not owned by the pod", ephemeralPod2, unresolvable(`PVC default/eph2-scratch was not created for pod default/eph2 (pod is not owner)`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkStatus(t, "PreFilter", e.pl.PreFilter(t.Context(), framework.NewCycleState(), tc.pod), tc.want)
		})
	}
}

// TestFilter checks each outcome of Filter and its message, on two nodes in two zones.
func TestFilter(t *testing.T) {
	n1 := node("n1", map[string]string{corev1.LabelTopologyZone: "a"})
	n2 := node("n2", map[string]string{corev1.LabelTopologyZone: "b"})
	selected := claim("selected", "provisioned", "1Gi")
	selected.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "n2"}
	objs := []runtime.Object{n1, n2,
		class("local", "kubernetes.io/no-provisioner", wffc),
		class("provisioned", "example.com/csi", wffc),
		class("zoned", "example.com/csi", wffc, zones("a")),
		class("tracked", "tracked.csi", wffc),
		&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "tracked.csi"}, Spec: storagev1.CSIDriverSpec{StorageCapacity: ptr.To(true)}},
		&storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Name: "cap-a", Namespace: ns}, StorageClassName: "tracked",
			NodeTopology: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelTopologyZone: "a"}}, Capacity: ptr.To(resource.MustParse("10Gi"))},
		&storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Name: "cap-b", Namespace: ns}, StorageClassName: "tracked",
			NodeTopology: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelTopologyZone: "b"}}, Capacity: ptr.To(resource.MustParse("1Gi"))},
		boundVolume(volume("pv-on-n1", "local", "1Gi", "n1"), boundClaim("bound-n1", "local", "1Gi", "pv-on-n1")),
		boundClaim("bound-n1", "local", "1Gi", "pv-on-n1"),
		boundClaim("bound-nowhere", "local", "1Gi", "pv-missing"),
		volume("static-n1", "local", "5Gi", "n1"),
		volume("small-n1", "local", "1Gi", "n1"),
		claim("wants-static", "local", "2Gi"), claim("wants-small", "local", "1Gi"), claim("wants-another", "local", "2Gi"),
		claim("wants-huge", "local", "100Gi"),
		claim("provisions", "provisioned", "1Gi"), claim("zoned", "zoned", "1Gi"), claim("tracked", "tracked", "5Gi"),
		selected,
	}
	e := newEnv(t, nil, objs...)
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		n1, n2 *framework.Status
	}{
		{"bound volume pinned to n1", pod("p", "bound-n1"), nil, unresolvable("node(s) had volume node affinity conflict")},
		{"bound volume missing", pod("p", "bound-nowhere"), unresolvable("node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"), unresolvable("node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)")},
		{"static volume reachable from n1 only, no provisioner", pod("p", "wants-static"), nil, unresolvable("node(s) didn't find available persistent volumes to bind")},
		{"no volume is large enough", pod("p", "wants-huge"), unresolvable("node(s) didn't find available persistent volumes to bind"), unresolvable("node(s) didn't find available persistent volumes to bind")},
		{"two claims take two volumes", pod("p", "wants-static", "wants-small"), nil, unresolvable("node(s) didn't find available persistent volumes to bind")},
		{"the one large volume cannot serve two claims", pod("p", "wants-static", "wants-another"), unresolvable("node(s) didn't find available persistent volumes to bind"), unresolvable("node(s) didn't find available persistent volumes to bind")},
		{"a provisioner serves every node", pod("p", "provisions"), nil, nil},
		{"allowedTopologies keep to zone a", pod("p", "zoned"), nil, unresolvable("node(s) didn't find available persistent volumes to bind")},
		{"capacity in zone a only", pod("p", "tracked"), nil, unresolvable("node(s) did not have enough free storage")},
		{"provisioning already chose n2", pod("p", "selected"), unresolvable("node(s) didn't find available persistent volumes to bind"), nil},
		{"bound conflict and no volume", pod("p", "bound-n1", "wants-huge"), unresolvable("node(s) didn't find available persistent volumes to bind"), unresolvable("node(s) had volume node affinity conflict", "node(s) didn't find available persistent volumes to bind")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := framework.NewCycleState()
			if st := e.pl.PreFilter(t.Context(), cs, tc.pod); !st.IsSuccess() {
				t.Fatalf("PreFilter: %v", st.Message())
			}
			checkStatus(t, "n1", e.pl.Filter(t.Context(), cs, tc.pod, nodeInfo(n1)), tc.n1)
			checkStatus(t, "n2", e.pl.Filter(t.Context(), cs, tc.pod, nodeInfo(n2)), tc.n2)
		})
	}

	// What Filter chose on n1: the smallest volume that fits each claim.
	cs := framework.NewCycleState()
	p := pod("p", "wants-static", "wants-small", "provisions")
	if st := e.pl.PreFilter(t.Context(), cs, p); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	if st := e.pl.Filter(t.Context(), cs, p, nodeInfo(n1)); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	s, _ := getState(cs)
	v := s.byNode["n1"]
	var got []string
	for _, b := range v.static {
		got = append(got, b.pvc.Name+"->"+b.pv.Name)
	}
	for _, c := range v.provision {
		got = append(got, c.Name+"->provision")
	}
	if want := "wants-small->small-n1 wants-static->static-n1 provisions->provision"; strings.Join(got, " ") != want {
		t.Errorf("chosen %q, want %q", strings.Join(got, " "), want)
	}
}

// cycle runs PreFilter, Filter on n and Reserve for p.
func (e *env) cycle(p *corev1.Pod, n *corev1.Node) (*framework.CycleState, *framework.Status) {
	e.t.Helper()
	cs := framework.NewCycleState()
	if st := e.pl.PreFilter(e.t.Context(), cs, p); !st.IsSuccess() && !st.IsSkip() {
		return cs, st
	}
	if st := e.pl.Filter(e.t.Context(), cs, p, nodeInfo(n)); !st.IsSuccess() {
		return cs, st
	}
	return cs, e.pl.Reserve(e.t.Context(), cs, p, n.Name)
}

// TestReserveUnreserve checks that a reserved volume is not offered to another
// pod, and is again once unreserved.
func TestReserveUnreserve(t *testing.T) {
	n1 := node("n1", nil)
	e := newEnv(t, nil, n1, class("local", "kubernetes.io/no-provisioner", wffc),
		volume("only", "local", "1Gi", "n1"), claim("a", "local", "1Gi"), claim("b", "local", "1Gi"))
	a, b := pod("pa", "a"), pod("pb", "b")
	csA, st := e.cycle(a, n1)
	if !st.IsSuccess() {
		t.Fatalf("pod a: %v", st.Message())
	}
	if _, st := e.cycle(b, n1); st.Code() != framework.UnschedulableAndUnresolvable || st.Message() != "node(s) didn't find available persistent volumes to bind" {
		t.Fatalf("pod b while a holds the volume: %v %q", st.Code(), st.Message())
	}
	pv, err := e.pl.pvs.get("only")
	if err != nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != "a" || pv.Spec.ClaimRef.UID != "uid-a" ||
		pv.Annotations["pv.kubernetes.io/bound-by-controller"] != "yes" {
		t.Fatalf("assumed volume %+v %v", pv, err)
	}
	if len(e.updates()) != 0 {
		t.Errorf("Reserve wrote to the API: %v", e.updates())
	}
	e.pl.Unreserve(t.Context(), csA, a, "n1")
	e.pl.Unreserve(t.Context(), csA, a, "n1") // idempotent
	if e.pl.pvs.assumedCount() != 0 {
		t.Errorf("%d objects still assumed", e.pl.pvs.assumedCount())
	}
	if _, st := e.cycle(b, n1); !st.IsSuccess() {
		t.Fatalf("pod b after a was unreserved: %v", st.Message())
	}
	// A pod without claims reserves nothing and binds nothing.
	cs, st := e.cycle(pod("plain"), n1)
	if !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	if st := e.pl.PreBind(t.Context(), cs, pod("plain"), "n1"); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
}

// binder plays the PersistentVolume binder in the fake clientset: it completes
// the binding of claim c to volume pv.
func (e *env) bindClaim(c *corev1.PersistentVolumeClaim, pvName string) {
	e.t.Helper()
	cur, err := e.client.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), c.Name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	cur.Spec.VolumeName = pvName
	metav1.SetMetaDataAnnotation(&cur.ObjectMeta, "pv.kubernetes.io/bind-completed", "yes")
	if _, err := e.client.CoreV1().PersistentVolumeClaims(ns).Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestPreBindStatic checks the volume's claimRef write and the wait for the binder.
func TestPreBindStatic(t *testing.T) {
	n1 := node("n1", nil)
	c := claim("data", "local", "1Gi")
	p := pod("p", "data")
	p.Spec.NodeName = "n1"
	e := newEnv(t, nil, n1, p, class("local", "kubernetes.io/no-provisioner", wffc), volume("pv1", "local", "1Gi", "n1"), c)
	cs, st := e.cycle(p, n1)
	if !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	done := make(chan *framework.Status, 1)
	go func() { done <- e.pl.PreBind(context.Background(), cs, p, "n1") }()
	// The volume is written pre-bound to the claim; then the binder binds the claim.
	e.waitFor("the volume written", func() bool { return len(e.updates()) == 1 })
	u := e.updates()[0]
	pv, ok := u.GetObject().(*corev1.PersistentVolume)
	if u.GetResource().Resource != "persistentvolumes" || !ok || pv.Name != "pv1" || pv.Spec.ClaimRef == nil ||
		pv.Spec.ClaimRef.Namespace != ns || pv.Spec.ClaimRef.Name != "data" || pv.Spec.ClaimRef.UID != c.UID ||
		pv.Annotations["pv.kubernetes.io/bound-by-controller"] != "yes" {
		t.Fatalf("update %s %+v", u.GetResource().Resource, u.GetObject())
	}
	select {
	case st := <-done:
		t.Fatalf("PreBind returned before the claim was bound: %v", st)
	default:
	}
	e.bindClaim(c, "pv1")
	if st := <-done; !st.IsSuccess() {
		t.Fatalf("PreBind: %v", st.Message())
	}
	if n := len(e.updates()); n != 2 { // the volume, and the test's claim
		t.Errorf("%d updates", n)
	}
}

// TestPreBindProvision checks the selected-node write and the failures the
// binding cycle reports: the provisioner gives up, or time runs out.
func TestPreBindProvision(t *testing.T) {
	n1 := node("n1", nil)
	p := pod("p", "data")
	p.Spec.NodeName = "n1"
	e := newEnv(t, Args{BindTimeout: time.Hour}, n1, p, class("csi", "example.com/csi", wffc), claim("data", "csi", "1Gi"))
	cs, st := e.cycle(p, n1)
	if !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	done := make(chan *framework.Status, 1)
	go func() { done <- e.pl.PreBind(context.Background(), cs, p, "n1") }()
	e.waitFor("the claim written", func() bool { return len(e.updates()) == 1 })
	u := e.updates()[0]
	pvc, ok := u.GetObject().(*corev1.PersistentVolumeClaim)
	if u.GetResource().Resource != "persistentvolumeclaims" || !ok || pvc.Name != "data" ||
		pvc.Annotations["volume.kubernetes.io/selected-node"] != "n1" {
		t.Fatalf("update %s %+v", u.GetResource().Resource, u.GetObject())
	}
	// The provisioner fails and hands the claim back (removes the annotation).
	e.waitFor("the informer to see the annotation", func() bool {
		c, err := e.pl.pvcs.getAPI(ns + "/data")
		return err == nil && c.Annotations["volume.kubernetes.io/selected-node"] == "n1"
	})
	back := pvc.DeepCopy()
	delete(back.Annotations, "volume.kubernetes.io/selected-node")
	if _, err := e.client.CoreV1().PersistentVolumeClaims(ns).Update(context.Background(), back, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	st = <-done
	if st.Code() != framework.Error || st.Message() != `binding volumes: provisioning failed for PVC "data"` {
		t.Errorf("PreBind: %v %q", st.Code(), st.Message())
	}

	// The next cycle annotates again; this time nothing binds before the timeout.
	e.waitFor("the informer to see the annotation gone", func() bool {
		c, err := e.pl.pvcs.get(ns + "/data")
		return err == nil && c.Annotations["volume.kubernetes.io/selected-node"] == ""
	})
	e.pl.Unreserve(t.Context(), cs, p, "n1")
	e.pl.bindTimeout = time.Millisecond
	cs, st = e.cycle(p, n1)
	if !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	if st := e.pl.PreBind(context.Background(), cs, p, "n1"); st.Code() != framework.Error || st.Message() != "binding volumes: context deadline exceeded" {
		t.Errorf("PreBind after the timeout: %v %q", st.Code(), st.Message())
	}
}

// TestPreBindVolumeTakenAway: the binder undid the pre-binding (claimRef reset).
func TestPreBindVolumeTakenAway(t *testing.T) {
	n1 := node("n1", nil)
	p := pod("p", "data")
	p.Spec.NodeName = "n1"
	e := newEnv(t, nil, n1, p, class("local", "kubernetes.io/no-provisioner", wffc), volume("pv1", "local", "1Gi", "n1"), claim("data", "local", "1Gi"))
	cs, st := e.cycle(p, n1)
	if !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	done := make(chan *framework.Status, 1)
	go func() { done <- e.pl.PreBind(context.Background(), cs, p, "n1") }()
	e.waitFor("the informer to see the written volume", func() bool {
		pv, err := e.pl.pvs.getAPI("pv1")
		return err == nil && pv.Spec.ClaimRef != nil
	})
	pv, _ := e.client.CoreV1().PersistentVolumes().Get(context.Background(), "pv1", metav1.GetOptions{})
	pv.Spec.ClaimRef = nil
	if _, err := e.client.CoreV1().PersistentVolumes().Update(context.Background(), pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if st := <-done; st.Code() != framework.Error || st.Message() != `binding volumes: ClaimRef got reset for pv "pv1"` {
		t.Errorf("PreBind: %v %q", st.Code(), st.Message())
	}
}

// TestPreBindWriteFails: a refused write fails PreBind and forgets what it did not write.
func TestPreBindWriteFails(t *testing.T) {
	n1 := node("n1", nil)
	p := pod("p", "data", "fresh")
	p.Spec.NodeName = "n1"
	e := newEnv(t, nil, n1, p, class("local", "kubernetes.io/no-provisioner", wffc), class("csi", "example.com/csi", wffc),
		volume("pv1", "local", "1Gi", "n1"), claim("data", "local", "1Gi"), claim("fresh", "csi", "1Gi"))
	cs, st := e.cycle(p, n1)
	if !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	if e.pl.pvs.assumedCount() != 1 || e.pl.pvcs.assumedCount() != 1 {
		t.Fatalf("assumed %d volumes and %d claims, want 1 and 1", e.pl.pvs.assumedCount(), e.pl.pvcs.assumedCount())
	}
	e.client.PrependReactor("update", "persistentvolumeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "persistentvolumeclaims"}, "fresh", errors.New("the object has been modified"))
	})
	st = e.pl.PreBind(context.Background(), cs, p, "n1")
	if st.Code() != framework.Error || !strings.HasPrefix(st.Message(), "update PersistentVolumeClaim default/fresh: Operation cannot be fulfilled") {
		t.Errorf("PreBind: %v %q", st.Code(), st.Message())
	}
	// The written volume stays assumed until the informer has it; the claim is forgotten.
	if e.pl.pvcs.assumedCount() != 0 {
		t.Errorf("%d claims still assumed", e.pl.pvcs.assumedCount())
	}
	e.waitFor("the informer to replace the assumed volume", func() bool { return e.pl.pvs.assumedCount() == 0 })
	e.pl.Unreserve(t.Context(), cs, p, "n1")
}
