package kubelet

import (
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A pod's sync reads the pod's sandboxes and containers from the runtime, acts, and reads them
// again for the status it writes. The PLEG's next relist then sees the sandbox and container
// the sync started as a change and triggered one more sync per pod start, which read the
// runtime twice more (eight CRI calls for a one-container pod) to find nothing to do. So each
// sync remembers the runtime state it acted on, and the state it read back when that is
// settled (every newest container running), as the PLEG's fingerprint, and the PLEG triggers
// no sync for a state the pod's worker has already seen: it acted on that state, or scheduled
// its own retry when it failed, or had nothing left to do. Upstream's PLEG feeds the pod cache
// the workers read from, so a worker there does not read the runtime itself; the effect is the
// same, one sync per change the kubelet did not make.

// fingerprint is the PLEG's summary of one pod's runtime objects: their IDs and states.
func fingerprint(parts []string) string {
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func sandboxPart(id string, state runtimeapi.PodSandboxState) string {
	return "s/" + id + "/" + state.String()
}

func containerPart(id string, state runtimeapi.ContainerState) string {
	return "c/" + id + "/" + state.String()
}

// fingerprint summarises what a sync read of the pod as the PLEG's relist does.
func (r *podRuntime) fingerprint() string {
	parts := make([]string, 0, len(r.sandboxes)+len(r.containers))
	for _, sb := range r.sandboxes {
		parts = append(parts, sandboxPart(sb.Id, sb.State))
	}
	for _, c := range r.containers {
		parts = append(parts, containerPart(c.id(), c.status.State))
	}
	return fingerprint(parts)
}

// settled tells whether a state a sync read back after acting needs no further sync: the
// newest sandbox is ready and the newest instance of every container runs. A container that
// ended between its start and the read-back (a crash loop's `exit 1`) is not settled: the sync
// reported it but did not act on it, and only the PLEG's trigger brings the sync that
// restarts it (with its back-off).
func (r *podRuntime) settled() bool {
	if len(r.sandboxes) > 0 && !r.sandboxReady() {
		return false
	}
	seen := make(map[string]bool, len(r.containers))
	for _, c := range r.containers { // newest first per name
		if seen[c.name()] {
			continue
		}
		seen[c.name()] = true
		if !c.running() {
			return false
		}
	}
	return true
}

// observe records the runtime state a sync of the pod has read.
func (k *Kubelet) observe(rt *podRuntime) {
	fp := rt.fingerprint()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.observed[rt.uid] = fp
}

// hasObserved tells whether the last runtime state a sync of the pod read is fp.
func (k *Kubelet) hasObserved(uid types.UID, fp string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	seen, ok := k.observed[uid]
	return ok && seen == fp
}
