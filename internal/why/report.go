// Package why explains, from what the API server holds, why a pod is pending or
// not ready and why a Service gets no traffic: for a pending pod it runs the
// scheduler's own PreFilter and Filter plugins (the default profile) over a
// snapshot of the listed Nodes and bound Pods, so every node is named with the
// filter that rejects it; for a pod that is not ready it reads the container
// states, probe failures (Unhealthy Events), readiness gates and the node; for a
// Service it compares its selector and target ports with the namespace's pods.
package why

// Report is the explanation of one object.
type Report struct {
	// Kind is "Pod", "Service" or "Deployment".
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Summary is the one-line answer.
	Summary string `json:"summary"`
	// Pods explains the pod (Kind Pod) or the Deployment's pods.
	Pods []PodReport `json:"pods,omitempty"`
	// Service explains a Service.
	Service *ServiceReport `json:"service,omitempty"`
}

// PodReport explains one pod.
type PodReport struct {
	Name  string `json:"name"`
	Phase string `json:"phase"`
	Node  string `json:"node,omitempty"`
	Ready bool   `json:"ready"`
	// Summary is the one-line answer for this pod.
	Summary string `json:"summary"`
	// Scheduling is set for a pod that is not bound to a node.
	Scheduling *Scheduling `json:"scheduling,omitempty"`
	// Containers lists the containers that are not ready (init containers first).
	Containers []ContainerReport `json:"containers,omitempty"`
	// Probes are the latest failure of each probe kind (from Unhealthy Events).
	Probes []ProbeFailure `json:"probes,omitempty"`
	// ReadinessGates lists the readiness gates whose condition is not True.
	ReadinessGates []string `json:"readinessGates,omitempty"`
	// NodeProblem says why the pod's node is not Ready, if it is not.
	NodeProblem string `json:"nodeProblem,omitempty"`
	// Conditions holds the pod's Ready/ContainersReady condition messages when False.
	Conditions []string `json:"conditions,omitempty"`
}

// Scheduling explains why a pod has no node.
type Scheduling struct {
	SchedulerName string `json:"schedulerName"`
	// Nodes is each node's verdict, in name order.
	Nodes []NodeVerdict `json:"nodes"`
	// Fits names the nodes every filter accepts.
	Fits []string `json:"fits,omitempty"`
	// PreFilter is set when a PreFilter plugin rejects the pod for every node.
	PreFilter *Rejection `json:"preFilter,omitempty"`
	// Condition is the PodScheduled condition's reason and message, the scheduler's last word.
	Condition string `json:"condition,omitempty"`
	// LastEvent is the latest FailedScheduling event's message.
	LastEvent string `json:"lastEvent,omitempty"`
	// NominatedNode is status.nominatedNodeName (set by preemption).
	NominatedNode string `json:"nominatedNode,omitempty"`
	// Preemption is the latest Preempted/preemption event about the pod, if any.
	Preemption string `json:"preemption,omitempty"`
}

// NodeVerdict is what the filters say about one node.
type NodeVerdict struct {
	Node string `json:"node"`
	// Rejections lists every filter that rejects the pod, in profile order;
	// the scheduler reports the first. Empty means the pod fits.
	Rejections []Rejection `json:"rejections,omitempty"`
}

// Rejection is one plugin's verdict.
type Rejection struct {
	Plugin string `json:"plugin"`
	Reason string `json:"reason"`
	// Detail gives the numbers behind a resource shortage.
	Detail string `json:"detail,omitempty"`
	// Unresolvable means preemption cannot help (UnschedulableAndUnresolvable).
	Unresolvable bool `json:"unresolvable,omitempty"`
	// Error is set when the plugin failed instead of deciding.
	Error bool `json:"error,omitempty"`
}

// ContainerReport is one container that is not ready.
type ContainerReport struct {
	Name string `json:"name"`
	Init bool   `json:"init,omitempty"`
	// State is "waiting", "running", "terminated" or "unknown".
	State    string `json:"state"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	Restarts int32  `json:"restarts,omitempty"`
	// LastTermination describes the previous run (exit code and reason) of a restarted container.
	LastTermination string `json:"lastTermination,omitempty"`
	// Logs are the container's last log lines when the kubelet answers.
	Logs []string `json:"logs,omitempty"`
}

// ProbeFailure is the latest failure of one probe kind.
type ProbeFailure struct {
	// Probe is "Readiness", "Liveness" or "Startup".
	Probe   string `json:"probe"`
	Message string `json:"message"`
	Count   int32  `json:"count,omitempty"`
}

// ServiceReport explains a Service.
type ServiceReport struct {
	Type     string            `json:"type"`
	Selector map[string]string `json:"selector,omitempty"`
	// Ports summarises the ports as "name port→target/protocol".
	Ports []string `json:"ports"`
	// Matched counts the pods the selector matches; Ready those of them that are ready.
	Matched int `json:"matched"`
	Ready   int `json:"ready"`
	// Missed are the pods the selector misses, closest first (at most 10).
	Missed []MissedPod `json:"missed,omitempty"`
	// MissedTotal counts every missed pod.
	MissedTotal int `json:"missedTotal"`
	// NotReady are matched pods that are not ready, with a short reason.
	NotReady []PodReason `json:"notReady,omitempty"`
	// PortProblems are target ports the matched pods do not expose.
	PortProblems []string `json:"portProblems,omitempty"`
	// EndpointSlices counts the Service's EndpointSlices; ReadyEndpoints their ready endpoints.
	EndpointSlices int `json:"endpointSlices"`
	ReadyEndpoints int `json:"readyEndpoints"`
}

// MissedPod is a pod the selector does not match, with the labels that differ.
type MissedPod struct {
	Name        string   `json:"name"`
	Differences []string `json:"differences"`
}

// PodReason is a pod with a short reason.
type PodReason struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}
