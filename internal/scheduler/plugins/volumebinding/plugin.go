// Package volumebinding is the VolumeBinding plugin, as upstream's
// pkg/scheduler/framework/plugins/volumebinding: it places a pod where its
// PersistentVolumeClaims can be met and binds the unbound ones before the pod.
//
//   - PreFilter rejects a pod whose claims are missing, being deleted, lost, or
//     unbound in Immediate mode (the PersistentVolume binder binds those).
//   - Filter, per node: a bound claim's volume must accept the node (its node
//     affinity); a claim of a WaitForFirstConsumer class needs an Available
//     volume reachable from the node (the smallest that fits, never one chosen
//     for another claim of the pod) or a class that can provision there (a
//     provisioner, allowedTopologies, and the CSIStorageCapacity of a CSI
//     driver that asks for capacity tracking).
//   - Reserve assumes the choices in the plugin's caches, so that the next
//     pods see the volumes as taken; Unreserve forgets them.
//   - PreBind writes them (the volume's claimRef for a static match, the
//     claim's volume.kubernetes.io/selected-node annotation for provisioning)
//     and waits until the PersistentVolume binder has bound every claim, at
//     most the bind timeout (600 s by default, upstream's), failing the
//     binding cycle when the binder or provisioner gives up.
//
// Changes of volumes, claims, classes and capacities move the pods it rejected
// back to the queue (EventsToRegister). Scoring by volume capacity is off in
// upstream 1.32 (the VolumeCapacityPriority gate) and is not built; in-tree
// volumes are not translated to CSI (kubette has no CSI migration).
package volumebinding

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// Name is the plugin's registered name.
const Name = "VolumeBinding"

// DefaultBindTimeout is how long PreBind waits for the claims to be bound
// (upstream's VolumeBindingArgs.bindTimeoutSeconds default).
const DefaultBindTimeout = 600 * time.Second

// stateKey is where PreFilter keeps the pod's claims in the cycle state.
const stateKey framework.StateKey = "PreFilter" + Name

// Args configure the plugin, as upstream's VolumeBindingArgs.
type Args struct {
	// BindTimeout bounds PreBind's wait for the claims to be bound; zero means
	// DefaultBindTimeout.
	BindTimeout time.Duration
}

// VolumeBinding binds pods' claims while scheduling them.
type VolumeBinding struct {
	client      kubernetes.Interface
	bindTimeout time.Duration

	pvcLister      corelisters.PersistentVolumeClaimLister
	podLister      corelisters.PodLister
	nodeLister     corelisters.NodeLister
	classLister    storagelisters.StorageClassLister
	driverLister   storagelisters.CSIDriverLister
	capacityLister storagelisters.CSIStorageCapacityLister

	pvs  *assumeCache[*corev1.PersistentVolume]
	pvcs *assumeCache[*corev1.PersistentVolumeClaim]
	// changed wakes PreBind's waits when a volume or claim changes.
	changed *notifier
	// recheck is how often PreBind looks again without a change (upstream polls each second).
	recheck time.Duration
}

var (
	_ framework.PreFilterPlugin   = (*VolumeBinding)(nil)
	_ framework.FilterPlugin      = (*VolumeBinding)(nil)
	_ framework.ReservePlugin     = (*VolumeBinding)(nil)
	_ framework.PreBindPlugin     = (*VolumeBinding)(nil)
	_ framework.EnqueueExtensions = (*VolumeBinding)(nil)
)

// New returns the plugin. args is nil (the defaults), Args or *Args; the
// handle must give a clientset and the informer factory, on which the plugin
// registers the informers of volumes, claims, classes, CSI drivers and
// capacities (and uses the scheduler's pods and nodes).
func New(_ context.Context, args any, h framework.Handle) (framework.Plugin, error) {
	var a Args
	switch v := args.(type) {
	case nil:
	case Args:
		a = v
	case *Args:
		if v != nil {
			a = *v
		}
	default:
		return nil, fmt.Errorf("%s: args must be volumebinding.Args, got %T", Name, args)
	}
	if a.BindTimeout < 0 {
		return nil, fmt.Errorf("%s: bindTimeout: Invalid value: %v: must be non-negative", Name, a.BindTimeout)
	}
	if a.BindTimeout == 0 {
		a.BindTimeout = DefaultBindTimeout
	}
	if h == nil || h.ClientSet() == nil || h.SharedInformerFactory() == nil {
		return nil, fmt.Errorf("%s needs a handle with a clientset and an informer factory", Name)
	}
	f := h.SharedInformerFactory()
	pvInf := f.Core().V1().PersistentVolumes().Informer()
	pvcInf := f.Core().V1().PersistentVolumeClaims().Informer()
	pl := &VolumeBinding{
		client:         h.ClientSet(),
		bindTimeout:    a.BindTimeout,
		pvcLister:      f.Core().V1().PersistentVolumeClaims().Lister(),
		podLister:      f.Core().V1().Pods().Lister(),
		nodeLister:     f.Core().V1().Nodes().Lister(),
		classLister:    f.Storage().V1().StorageClasses().Lister(),
		driverLister:   f.Storage().V1().CSIDrivers().Lister(),
		capacityLister: f.Storage().V1().CSIStorageCapacities().Lister(),
		pvs:            newAssumeCache[*corev1.PersistentVolume]("v1.PersistentVolume", pvInf.GetStore()),
		pvcs:           newAssumeCache[*corev1.PersistentVolumeClaim]("v1.PersistentVolumeClaim", pvcInf.GetStore()),
		changed:        &notifier{},
		recheck:        time.Second,
	}
	for _, x := range []struct {
		inf     cache.SharedIndexInformer
		observe func(obj any, deleted bool)
	}{{pvInf, pl.pvs.observe}, {pvcInf, pl.pvcs.observe}} {
		observe := x.observe
		if _, err := x.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { observe(obj, false); pl.changed.notify() },
			UpdateFunc: func(_, obj any) { observe(obj, false); pl.changed.notify() },
			DeleteFunc: func(obj any) { observe(obj, true); pl.changed.notify() },
		}); err != nil {
			return nil, fmt.Errorf("%s: add event handler: %w", Name, err)
		}
	}
	return pl, nil
}

// Name returns Name.
func (pl *VolumeBinding) Name() string { return Name }

// stateData is the plugin's cycle state: the pod's claims from PreFilter and
// the volumes Filter found for each node. It is shared by the state's clones
// (Filter runs on clones with nominated pods too), hence the lock.
type stateData struct {
	claims *podClaims

	mu       sync.Mutex
	byNode   map[string]*podVolumes
	allBound bool
}

// Clone returns the same data: the clones of a cycle share what Filter found.
func (d *stateData) Clone() framework.StateData { return d }

func getState(cs *framework.CycleState) (*stateData, error) {
	d, err := cs.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("read %s state: %w", Name, err)
	}
	s, ok := d.(*stateData)
	if !ok {
		return nil, fmt.Errorf("%s state holds %T", Name, d)
	}
	return s, nil
}

// PreFilter checks that the pod's claims exist and may be used, and that its
// Immediate claims are bound; Skip for a pod without claims.
func (pl *VolumeBinding) PreFilter(_ context.Context, cs *framework.CycleState, pod *corev1.Pod) *framework.Status {
	hasClaims, err := pl.checkPodClaims(pod)
	if err != nil {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
	}
	if !hasClaims {
		cs.Write(stateKey, &stateData{})
		return framework.NewStatus(framework.Skip)
	}
	claims, err := pl.podVolumeClaims(pod)
	if err != nil {
		return framework.AsStatus(err)
	}
	if len(claims.unboundImmediate) > 0 {
		// The binder binds them; their update brings the pod back.
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonUnboundImmediate)
	}
	cs.Write(stateKey, &stateData{claims: claims, byNode: map[string]*podVolumes{}})
	return nil
}

// Filter checks that the pod's claims can be met on the node: bound claims'
// volumes reach it, and every unbound one has a volume or a provisioner for it.
func (pl *VolumeBinding) Filter(_ context.Context, cs *framework.CycleState, pod *corev1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	node := nodeInfo.Node()
	if node == nil {
		return framework.AsStatus(errors.New("node not found"))
	}
	s, err := getState(cs)
	if err != nil {
		return framework.AsStatus(err)
	}
	if s.claims == nil {
		// PreFilter said Skip: the pod has no claims.
		return nil
	}
	volumes, reasons, err := pl.findPodVolumes(s.claims, node)
	if err != nil {
		return framework.AsStatus(err)
	}
	if len(reasons) > 0 {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, reasons...)
	}
	s.mu.Lock()
	s.byNode[node.Name] = volumes
	s.mu.Unlock()
	return nil
}

// Reserve assumes the volumes chosen for the node in the plugin's caches.
func (pl *VolumeBinding) Reserve(_ context.Context, cs *framework.CycleState, pod *corev1.Pod, nodeName string) *framework.Status {
	s, err := getState(cs)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	volumes, ok := s.byNode[nodeName]
	if !ok {
		// The pod has no claims.
		s.allBound = true
		return nil
	}
	allBound, err := pl.assumePodVolumes(pod, nodeName, volumes)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.allBound = allBound
	return nil
}

// Unreserve forgets what Reserve assumed; it does nothing when nothing was.
func (pl *VolumeBinding) Unreserve(_ context.Context, cs *framework.CycleState, _ *corev1.Pod, nodeName string) {
	s, err := getState(cs)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if volumes, ok := s.byNode[nodeName]; ok {
		pl.revert(volumes.static, volumes.provision)
	}
}

// PreBind writes the bindings Reserve assumed and waits until the binder has
// bound every claim of the pod.
func (pl *VolumeBinding) PreBind(ctx context.Context, cs *framework.CycleState, pod *corev1.Pod, nodeName string) *framework.Status {
	s, err := getState(cs)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.mu.Lock()
	allBound := s.allBound
	volumes, ok := s.byNode[nodeName]
	s.mu.Unlock()
	if allBound {
		return nil
	}
	if !ok {
		return framework.AsStatus(fmt.Errorf("no pod volumes found for node %q", nodeName))
	}
	if err := pl.bindPodVolumes(ctx, pod, volumes); err != nil {
		return framework.AsStatus(err)
	}
	return nil
}

// notifier wakes the waiters on a channel closed at each change.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next notify.
func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// notify wakes every waiter.
func (n *notifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}
