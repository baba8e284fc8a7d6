package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// boundPods selects every pod bound to some node; the event handlers keep
// those of simulated nodes.
const boundPods = "spec.nodeName!="

// podRetryBase and podRetryMax bound the per-pod backoff after a failed sync.
const (
	podRetryBase = 10 * time.Millisecond
	podRetryMax  = 30 * time.Second
)

// podInfo is what the informer cache keeps of a pod: the few fields the
// simulator reads, about a tenth of a *corev1.Pod, so that 100k pods fit in
// little memory. It is built by trimPod and never changed afterwards.
type podInfo struct {
	// ObjectMeta holds only name, namespace, uid, resourceVersion and the deletion fields.
	metav1.ObjectMeta
	node           *node // nil when the pod is bound to a node that is not simulated here
	hostNetwork    bool
	restartPolicy  corev1.RestartPolicy
	exitAfter      time.Duration
	initContainers []containerInfo
	containers     []containerInfo
	phase          corev1.PodPhase
	podIP          string
	startTime      time.Time
	ready          bool
}

// containerInfo is what the simulator needs of a container to report its status.
type containerInfo struct {
	name, image string
	sidecar     bool // an init container with restartPolicy Always
}

var _ runtime.Object = (*podInfo)(nil)

// GetObjectKind implements runtime.Object.
func (p *podInfo) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object; the container lists are shared, as
// they are never changed.
func (p *podInfo) DeepCopyObject() runtime.Object {
	c := *p
	p.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// podRecord is what the simulator handed to a pod: its address (returned to the
// node's pool when the pod is gone or finished) and when it started.
type podRecord struct {
	uid     types.UID
	node    *node
	ip      netip.Addr
	pooled  bool // ip came from node's pool and goes back to it
	started time.Time
}

// trimPod is the informer's transform: it keeps the podInfo of a pod.
func (s *Sim) trimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone or an already trimmed pod
	}
	p := &podInfo{ObjectMeta: metav1.ObjectMeta{
		Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		DeletionTimestamp: pod.DeletionTimestamp, DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds,
	}}
	p.node = s.byName[pod.Spec.NodeName]
	if p.node == nil {
		return p, nil
	}
	p.hostNetwork = pod.Spec.HostNetwork
	p.restartPolicy = pod.Spec.RestartPolicy
	if v, ok := pod.Annotations[AnnotationExitAfter]; ok {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			p.exitAfter = d
		}
	}
	p.initContainers = make([]containerInfo, len(pod.Spec.InitContainers))
	for i, c := range pod.Spec.InitContainers {
		p.initContainers[i] = containerInfo{name: c.Name, image: c.Image,
			sidecar: c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways}
	}
	p.containers = make([]containerInfo, len(pod.Spec.Containers))
	for i, c := range pod.Spec.Containers {
		p.containers[i] = containerInfo{name: c.Name, image: c.Image}
	}
	p.phase, p.podIP = pod.Status.Phase, pod.Status.PodIP
	if pod.Status.StartTime != nil {
		p.startTime = pod.Status.StartTime.Time
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			p.ready = c.Status == corev1.ConditionTrue
		}
	}
	return p, nil
}

// startPods starts the pod informer and the workers, and waits for the
// informer's first list.
func (s *Sim) startPods(ctx context.Context, wg *sync.WaitGroup) error {
	s.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](podRetryBase, podRetryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "sim-pods", Clock: s.cfg.Clock},
	)
	informer := coreinformers.NewFilteredPodInformer(s.client, metav1.NamespaceAll, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.FieldSelector = boundPods })
	if err := informer.SetTransform(s.trimPod); err != nil {
		return fmt.Errorf("failed to set the pod transform: %w", err)
	}
	enqueue := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		p, ok := obj.(*podInfo)
		if !ok || p.node == nil {
			return
		}
		s.queue.Add(p.Namespace + "/" + p.Name)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { enqueue(obj) },
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return fmt.Errorf("failed to add the pod event handler: %w", err)
	}
	s.indexer = informer.GetIndexer()
	wg.Add(1)
	go func() {
		defer wg.Done()
		informer.RunWithContext(ctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil // ctx is done
	}
	// Reserve the addresses of pods already running (left by an earlier run)
	// before any worker hands out addresses.
	for _, obj := range s.indexer.List() {
		if p, ok := obj.(*podInfo); ok && p.node != nil && p.DeletionTimestamp == nil && p.phase == corev1.PodRunning && p.podIP != "" {
			s.adoptPod(p.Namespace+"/"+p.Name, p)
		}
	}
	close(s.podsSynced)
	for range s.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s.processNextPod(ctx) {
			}
		}()
	}
	return nil
}

// processNextPod syncs one pod key; it returns false once the queue shut down.
func (s *Sim) processNextPod(ctx context.Context) bool {
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	if err := s.syncPod(ctx, key); err != nil {
		if ctx.Err() == nil {
			s.stats.errors.Add(1)
			s.cfg.Logger.Debug("pod sync failed", "pod", key, "err", err)
		}
		s.queue.AddRateLimited(key)
		return true
	}
	s.queue.Forget(key)
	return true
}

// syncPod moves one pod a step through its lifecycle from what the cache says now.
func (s *Sim) syncPod(ctx context.Context, key string) error {
	obj, exists, err := s.indexer.GetByKey(key)
	if err != nil {
		return fmt.Errorf("failed to read pod %s from the cache: %w", key, err)
	}
	if !exists {
		s.releasePod(key, "")
		return nil
	}
	p := obj.(*podInfo)
	if p.node == nil || p.node.gone.Load() {
		return nil
	}
	switch {
	case p.DeletionTimestamp != nil:
		return s.finishDeletion(ctx, key, p)
	case p.phase == corev1.PodSucceeded || p.phase == corev1.PodFailed:
		s.releasePod(key, p.UID)
		return nil
	case p.phase == corev1.PodRunning && p.ready && p.podIP != "":
		s.adoptPod(key, p)
		return s.exitWhenDue(ctx, key, p)
	}
	return s.startPod(ctx, key, p)
}

// startPod gives a pod an address and reports it Running and Ready.
func (s *Sim) startPod(ctx context.Context, key string, p *podInfo) error {
	rec, err := s.assign(key, p)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(podStatusPatch{Metadata: patchMeta{UID: p.UID}, Status: runningStatus(p, rec)})
	if err != nil {
		return fmt.Errorf("failed to encode the status of pod %s: %w", key, err)
	}
	if err := s.patchPodStatus(ctx, p, patch); err != nil {
		if apierrors.IsNotFound(err) {
			s.releasePod(key, p.UID)
			return nil
		}
		return fmt.Errorf("failed to report pod %s running: %w", key, err)
	}
	s.stats.podsStarted.Add(1)
	return s.exitWhenDue(ctx, key, p)
}

// patchPodStatus sends a strategic merge patch to the pod's status, as the
// kubelet's status manager does (the uid in the patch guards against a pod
// recreated under the same name). The response is not decoded: nothing in it
// is needed, and the informer brings the pod back anyway.
func (s *Sim) patchPodStatus(ctx context.Context, p *podInfo, patch []byte) error {
	return s.client.CoreV1().RESTClient().Patch(types.StrategicMergePatchType).
		Namespace(p.Namespace).Resource("pods").Name(p.Name).SubResource("status").
		Body(patch).Do(ctx).Error()
}

// exitWhenDue completes a pod that asked for it with AnnotationExitAfter once
// its time has come, and requeues it until then.
func (s *Sim) exitWhenDue(ctx context.Context, key string, p *podInfo) error {
	if p.exitAfter <= 0 || p.restartPolicy == corev1.RestartPolicyAlways {
		return nil
	}
	started := p.startTime
	s.ipMu.Lock()
	if rec := s.pods[key]; rec != nil && rec.uid == p.UID {
		started = rec.started
	}
	s.ipMu.Unlock()
	if d := started.Add(p.exitAfter).Sub(s.cfg.Clock.Now()); d > 0 {
		s.queue.AddAfter(key, d)
		return nil
	}
	patch, err := json.Marshal(podStatusPatch{Metadata: patchMeta{UID: p.UID}, Status: succeededStatus(p, started, s.cfg.Clock.Now())})
	if err != nil {
		return fmt.Errorf("failed to encode the status of pod %s: %w", key, err)
	}
	if err := s.patchPodStatus(ctx, p, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to report pod %s succeeded: %w", key, err)
	}
	s.stats.podsCompleted.Add(1)
	s.releasePod(key, p.UID)
	return nil
}

// finishDeletion deletes a pod for good, with grace period 0 and its UID as a
// precondition as a kubelet does, once deletionDeadline has passed.
func (s *Sim) finishDeletion(ctx context.Context, key string, p *podInfo) error {
	deadline := deletionDeadline(p.ObjectMeta, s.cfg.MaxDeletionGrace)
	if d := deadline.Sub(s.cfg.Clock.Now()); d > 0 {
		s.queue.AddAfter(key, d)
		return nil
	}
	err := s.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID}})
	switch {
	case err == nil:
		s.stats.podsDeleted.Add(1)
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// Gone already, or another pod of that name now.
	default:
		return fmt.Errorf("failed to delete pod %s: %w", key, err)
	}
	return nil
}

// assign returns the record of a pod being started: the one it has, or a new
// one with an address from its node's pool (the node's own address for a
// host-network pod).
func (s *Sim) assign(key string, p *podInfo) (*podRecord, error) {
	s.ipMu.Lock()
	defer s.ipMu.Unlock()
	if rec := s.pods[key]; rec != nil {
		if rec.uid == p.UID {
			return rec, nil
		}
		s.releaseLocked(key, rec)
	}
	rec := &podRecord{uid: p.UID, node: p.node, started: s.cfg.Clock.Now().Truncate(time.Second)}
	if p.hostNetwork {
		rec.ip = p.node.ip
	} else {
		ip, ok := p.node.pool.allocate()
		if !ok {
			return nil, fmt.Errorf("no free address for pod %s in pod CIDR %s of node %s", key, p.node.cidr, p.node.name)
		}
		rec.ip, rec.pooled = ip, true
	}
	s.pods[key] = rec
	return rec, nil
}

// adoptPod records a pod found Running (by an earlier run of the simulator),
// reserving its address so that no other pod gets it.
func (s *Sim) adoptPod(key string, p *podInfo) {
	s.ipMu.Lock()
	defer s.ipMu.Unlock()
	if rec := s.pods[key]; rec != nil {
		if rec.uid == p.UID {
			return
		}
		s.releaseLocked(key, rec)
	}
	rec := &podRecord{uid: p.UID, node: p.node, started: p.startTime}
	if ip, err := netip.ParseAddr(p.podIP); err == nil {
		rec.ip = ip
		if !p.hostNetwork && p.node.cidr.Contains(ip) {
			if rec.pooled = p.node.pool.reserve(ip); !rec.pooled {
				s.cfg.Logger.Warn("pod has an address that is already in use", "pod", key, "ip", p.podIP, "node", p.node.name)
			}
		}
	}
	s.pods[key] = rec
}

// releasePod returns the address of key's pod to its node's pool; with a
// non-empty uid only when the record is that pod's.
func (s *Sim) releasePod(key string, uid types.UID) {
	s.ipMu.Lock()
	defer s.ipMu.Unlock()
	if rec := s.pods[key]; rec != nil && (uid == "" || rec.uid == uid) {
		s.releaseLocked(key, rec)
	}
}

func (s *Sim) releaseLocked(key string, rec *podRecord) {
	if rec.pooled {
		rec.node.pool.release(rec.ip)
	}
	delete(s.pods, key)
}

// podStatusPatch is a strategic merge patch of a pod's status.
type podStatusPatch struct {
	Metadata patchMeta        `json:"metadata"`
	Status   corev1.PodStatus `json:"status"`
}

type patchMeta struct {
	UID types.UID `json:"uid"`
}

// runningStatus is the status a kubelet reports for a pod whose containers all
// started and are ready (init containers completed, sidecars running).
func runningStatus(p *podInfo, rec *podRecord) corev1.PodStatus {
	started := metav1.NewTime(rec.started)
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: started}
	}
	st := corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			cond(corev1.PodReadyToStartContainers), cond(corev1.PodInitialized),
			cond(corev1.PodReady), cond(corev1.ContainersReady), cond(corev1.PodScheduled),
		},
		HostIP:    p.node.ip.String(),
		HostIPs:   []corev1.HostIP{{IP: p.node.ip.String()}},
		PodIP:     rec.ip.String(),
		PodIPs:    []corev1.PodIP{{IP: rec.ip.String()}},
		StartTime: &started,
	}
	for _, c := range p.initContainers {
		cs := containerStatus(p, c)
		if c.sidecar {
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: started}
			cs.Ready, cs.Started = true, ptr.To(true)
		} else {
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: started, ContainerID: cs.ContainerID}
			cs.Ready, cs.Started = true, ptr.To(false)
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	for _, c := range p.containers {
		cs := containerStatus(p, c)
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: started}
		cs.Ready, cs.Started = true, ptr.To(true)
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	return st
}

// succeededStatus is the status of a pod whose containers all exited with code 0.
func succeededStatus(p *podInfo, startedAt, now time.Time) corev1.PodStatus {
	started, finished := metav1.NewTime(startedAt), metav1.NewTime(now.Truncate(time.Second))
	cond := func(t corev1.PodConditionType, st corev1.ConditionStatus, reason string) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: st, Reason: reason, LastTransitionTime: finished}
	}
	st := corev1.PodStatus{
		Phase: corev1.PodSucceeded,
		Conditions: []corev1.PodCondition{
			cond(corev1.PodReadyToStartContainers, corev1.ConditionFalse, ""),
			cond(corev1.PodReady, corev1.ConditionFalse, "PodCompleted"),
			cond(corev1.ContainersReady, corev1.ConditionFalse, "PodCompleted"),
		},
	}
	terminated := func(cs corev1.ContainerStatus) corev1.ContainerStatus {
		cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: finished, ContainerID: cs.ContainerID}
		cs.Ready, cs.Started = false, ptr.To(false)
		return cs
	}
	for _, c := range p.initContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, terminated(containerStatus(p, c)))
	}
	for _, c := range p.containers {
		st.ContainerStatuses = append(st.ContainerStatuses, terminated(containerStatus(p, c)))
	}
	return st
}

// containerStatus fills what every status of container c reports: names, a
// stable image digest and container ID derived from the names.
func containerStatus(p *podInfo, c containerInfo) corev1.ContainerStatus {
	imageID := c.image
	if !strings.Contains(c.image, "@") {
		digest := sha256.Sum256([]byte(c.image))
		imageID = c.image + "@sha256:" + hex.EncodeToString(digest[:])
	}
	id := sha256.Sum256([]byte(string(p.UID) + "/" + c.name))
	return corev1.ContainerStatus{
		Name:        c.name,
		Image:       c.image,
		ImageID:     imageID,
		ContainerID: "kubette-sim://" + hex.EncodeToString(id[:]),
	}
}

// deletionDeadline is when a pod marked for deletion is deleted for good:
// min(its grace period, maxGrace) after the deletion was asked for (its whole
// grace period when maxGrace is negative).
//
// The request time is not stored: deletionTimestamp is the request time plus
// the grace period, truncated to the second on the wire, so the request lies in
// [deletionTimestamp-grace, deletionTimestamp-grace+1s). The wait counts from
// the latest of those, so a pod is never deleted before it has been
// Terminating for the wait (counting from the earliest deleted some pods a few
// milliseconds after the request).
func deletionDeadline(meta metav1.ObjectMeta, maxGrace time.Duration) time.Time {
	var grace time.Duration
	if meta.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*meta.DeletionGracePeriodSeconds) * time.Second
	}
	wait := grace
	if maxGrace >= 0 {
		wait = min(grace, maxGrace)
	}
	return meta.DeletionTimestamp.Add(-grace).Add(time.Second).Add(wait)
}
