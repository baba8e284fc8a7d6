package nodestatus

import (
	"runtime"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Upstream's defaults that shape capacity, allocatable and the pressure conditions.
const (
	maxPods = 110
	// evictionMemory is the hard eviction threshold memory.available<100Mi.
	evictionMemory = 100 << 20
	// evictionNodefsPercent and evictionInodesPercent are nodefs.available<10% and
	// nodefs.inodesFree<5%.
	evictionNodefsPercent = 10
	evictionInodesPercent = 5
)

// host is what the node reports about the machine, read afresh for each status update.
type host struct {
	cpus               int
	memTotal, memAvail uint64
	fsSize, fsAvail    uint64
	inodesFree, inodes uint64
	info               v1.NodeSystemInfo
	addresses          []v1.NodeAddress
	kubeletPort        int32
}

// readHost reads the machine's facts. dataDir is the filesystem that ephemeral-storage
// measures.
func readHost(dataDir, runtimeVersion, kubeletVersion string) (host, error) {
	h := host{cpus: runtime.NumCPU()}
	var err error
	if h.memTotal, h.memAvail, err = memInfo(); err != nil {
		return h, err
	}
	if h.fsSize, h.fsAvail, h.inodesFree, h.inodes, err = fsInfo(dataDir); err != nil {
		return h, err
	}
	h.info = v1.NodeSystemInfo{
		MachineID:               firstLine("/etc/machine-id"),
		SystemUUID:              firstLine("/sys/class/dmi/id/product_uuid"),
		BootID:                  firstLine("/proc/sys/kernel/random/boot_id"),
		KernelVersion:           kernelVersion(),
		OSImage:                 osImage(),
		ContainerRuntimeVersion: runtimeVersion,
		KubeletVersion:          kubeletVersion,
		OperatingSystem:         runtime.GOOS,
		Architecture:            runtime.GOARCH,
	}
	return h, nil
}

// setStatus writes into node the status the kubelet reports: capacity, allocatable,
// nodeInfo, addresses, the kubelet's endpoint and the conditions. readyErr is the runtime's
// readiness (nil: ready). Conditions keep their lastTransitionTime unless their status changes;
// every condition gets lastHeartbeatTime now.
func setStatus(node *v1.Node, h host, readyErr error, now metav1.Time) {
	s := &node.Status
	fsAlloc := h.fsSize - h.fsSize*evictionNodefsPercent/100
	memAlloc := int64(h.memTotal) - evictionMemory
	if memAlloc < 0 {
		memAlloc = 0
	}
	s.Capacity = v1.ResourceList{
		v1.ResourceCPU:              *resource.NewQuantity(int64(h.cpus), resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(int64(h.memTotal), resource.BinarySI),
		v1.ResourcePods:             *resource.NewQuantity(maxPods, resource.DecimalSI),
		v1.ResourceEphemeralStorage: *resource.NewQuantity(int64(h.fsSize), resource.BinarySI),
	}
	s.Allocatable = v1.ResourceList{
		v1.ResourceCPU:              *resource.NewQuantity(int64(h.cpus), resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(memAlloc, resource.BinarySI),
		v1.ResourcePods:             *resource.NewQuantity(maxPods, resource.DecimalSI),
		v1.ResourceEphemeralStorage: *resource.NewQuantity(int64(fsAlloc), resource.BinarySI),
	}
	s.NodeInfo = h.info
	if len(h.addresses) > 0 {
		s.Addresses = h.addresses
	}
	s.DaemonEndpoints.KubeletEndpoint.Port = h.kubeletPort

	memPressure := h.memAvail < evictionMemory
	diskPressure := h.fsSize > 0 && h.fsAvail*100 < h.fsSize*evictionNodefsPercent ||
		h.inodes > 0 && h.inodesFree*100 < h.inodes*evictionInodesPercent
	setCondition(s, pressure(v1.NodeMemoryPressure, memPressure,
		"KubeletHasInsufficientMemory", "kubelet has insufficient memory available",
		"KubeletHasSufficientMemory", "kubelet has sufficient memory available"), now)
	setCondition(s, pressure(v1.NodeDiskPressure, diskPressure,
		"KubeletHasDiskPressure", "kubelet has disk pressure",
		"KubeletHasNoDiskPressure", "kubelet has no disk pressure"), now)
	// Upstream sets no PID eviction threshold by default: PID pressure is never reported.
	setCondition(s, pressure(v1.NodePIDPressure, false,
		"KubeletHasInsufficientPID", "kubelet has insufficient PID available",
		"KubeletHasSufficientPID", "kubelet has sufficient PID available"), now)
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}
	if readyErr != nil {
		ready = v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "KubeletNotReady", Message: readyErr.Error()}
	}
	setCondition(s, ready, now)
}

func pressure(t v1.NodeConditionType, on bool, onReason, onMsg, offReason, offMsg string) v1.NodeCondition {
	if on {
		return v1.NodeCondition{Type: t, Status: v1.ConditionTrue, Reason: onReason, Message: onMsg}
	}
	return v1.NodeCondition{Type: t, Status: v1.ConditionFalse, Reason: offReason, Message: offMsg}
}

// setCondition records c with heartbeat now; the transition time moves only when the
// status changes.
func setCondition(s *v1.NodeStatus, c v1.NodeCondition, now metav1.Time) {
	c.LastHeartbeatTime = now
	for i := range s.Conditions {
		old := &s.Conditions[i]
		if old.Type != c.Type {
			continue
		}
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status || c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = now
		}
		*old = c
		return
	}
	c.LastTransitionTime = now
	s.Conditions = append(s.Conditions, c)
}
