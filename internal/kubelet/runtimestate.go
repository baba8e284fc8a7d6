package kubelet

import (
	"context"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podRuntime is what the runtime holds for one pod UID: its sandboxes (newest first) and its
// containers with their full statuses (newest first per name).
type podRuntime struct {
	uid        types.UID
	sandboxes  []*runtimeapi.PodSandboxStatus
	containers []*containerState
}

// containerState is one container instance in the runtime.
type containerState struct {
	status       *runtimeapi.ContainerStatus
	sandboxID    string
	restartCount int
}

func (c *containerState) name() string { return c.status.GetMetadata().GetName() }
func (c *containerState) id() string   { return c.status.Id }
func (c *containerState) running() bool {
	return c.status.State == runtimeapi.ContainerState_CONTAINER_RUNNING
}
func (c *containerState) exited() bool {
	return c.status.State == runtimeapi.ContainerState_CONTAINER_EXITED
}
func (c *containerState) finishedAt() time.Time { return time.Unix(0, c.status.FinishedAt) }

// latestSandbox is the newest sandbox, or nil.
func (r *podRuntime) latestSandbox() *runtimeapi.PodSandboxStatus {
	if len(r.sandboxes) == 0 {
		return nil
	}
	return r.sandboxes[0]
}

// sandboxReady tells whether the newest sandbox is ready.
func (r *podRuntime) sandboxReady() bool {
	s := r.latestSandbox()
	return s != nil && s.State == runtimeapi.PodSandboxState_SANDBOX_READY
}

// instances returns a container's instances, newest first.
func (r *podRuntime) instances(name string) []*containerState {
	var out []*containerState
	for _, c := range r.containers {
		if c.name() == name {
			out = append(out, c)
		}
	}
	return out
}

// latest returns a container's newest instance, or nil.
func (r *podRuntime) latest(name string) *containerState {
	for _, c := range r.containers {
		if c.name() == name {
			return c
		}
	}
	return nil
}

// empty tells whether nothing of the pod is left in the runtime.
func (r *podRuntime) empty() bool { return len(r.sandboxes) == 0 && len(r.containers) == 0 }

// anyRunning tells whether a container still runs.
func (r *podRuntime) anyRunning() bool {
	for _, c := range r.containers {
		if c.running() || c.status.State == runtimeapi.ContainerState_CONTAINER_CREATED {
			return true
		}
	}
	return false
}

// readRuntime lists a pod's sandboxes and containers by the pod UID label.
func readRuntime(ctx context.Context, rt RuntimeService, uid types.UID) (*podRuntime, error) {
	sel := map[string]string{labelPodUID: string(uid)}
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes of pod %s: %w", uid, err)
	}
	r := &podRuntime{uid: uid}
	for _, sb := range sbs {
		st, err := rt.PodSandboxStatus(ctx, sb.Id, false)
		if err != nil {
			return nil, fmt.Errorf("status of sandbox %s: %w", sb.Id, err)
		}
		if st.GetStatus() != nil {
			r.sandboxes = append(r.sandboxes, st.Status)
		}
	}
	sort.SliceStable(r.sandboxes, func(i, j int) bool {
		a, b := r.sandboxes[i], r.sandboxes[j]
		if a.GetMetadata().GetAttempt() != b.GetMetadata().GetAttempt() {
			return a.GetMetadata().GetAttempt() > b.GetMetadata().GetAttempt()
		}
		return a.CreatedAt > b.CreatedAt
	})
	cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list containers of pod %s: %w", uid, err)
	}
	for _, c := range cs {
		st, err := rt.ContainerStatus(ctx, c.Id, false)
		if err != nil {
			return nil, fmt.Errorf("status of container %s: %w", c.Id, err)
		}
		if st.GetStatus() == nil {
			continue
		}
		s := st.Status
		if s.Labels == nil {
			s.Labels = c.Labels
		}
		if s.Annotations == nil {
			s.Annotations = c.Annotations
		}
		r.containers = append(r.containers, &containerState{status: s, sandboxID: c.PodSandboxId, restartCount: restartCountOf(s.Annotations)})
	}
	sort.SliceStable(r.containers, func(i, j int) bool {
		a, b := r.containers[i], r.containers[j]
		if a.restartCount != b.restartCount {
			return a.restartCount > b.restartCount
		}
		return a.status.CreatedAt > b.status.CreatedAt
	})
	return r, nil
}
