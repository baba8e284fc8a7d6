// Package steps turns what kubette's runtime did for a pod — its sandbox's network set-up
// (CNI ADD) and its containers' runc create, start, kill and delete — into events.k8s.io/v1
// Events about the pod, sent in the background from a bounded queue: a pod's start never
// waits for an Event, and Events that do not fit are dropped. `kubette trace` draws them as
// the runtime's side of the kubelet's CRI calls.
package steps

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Controller is the reportingController of the runtime's Events; their reportingInstance
// is the node's name.
const Controller = "kubette-runtime"

// The reasons of the runtime's Events (all of type Normal), one per kind of step.
const (
	ReasonNetworkReady = "NetworkReady"
	ReasonRuncCreated  = "RuncCreated"
	ReasonRuncStarted  = "RuncStarted"
	ReasonRuncStopped  = "RuncStopped"
	ReasonRuncDeleted  = "RuncDeleted"
)

// Kind says which step a Step is.
type Kind int

const (
	// NetworkReady is a sandbox's network set up by CNI ADD (RunPodSandbox).
	NetworkReady Kind = iota
	// ContainerCreated is `runc create` of a container (StartContainer, before the start:
	// CreateContainer only prepares the bundle, as containerd's CRI plugin).
	ContainerCreated
	// ContainerStarted is runc's start (StartContainer): through its exec FIFO, or `runc start`.
	ContainerStarted
	// ContainerStopped is `runc kill` until the container exited (StopContainer).
	ContainerStopped
	// ContainerDeleted is `runc delete` (RemoveContainer).
	ContainerDeleted
)

// kinds gives each Kind its Event reason and the CRI call it answers (the Event's action).
var kinds = map[Kind]struct{ reason, action string }{
	NetworkReady:     {ReasonNetworkReady, "RunPodSandbox"},
	ContainerCreated: {ReasonRuncCreated, "StartContainer"},
	ContainerStarted: {ReasonRuncStarted, "StartContainer"},
	ContainerStopped: {ReasonRuncStopped, "StopContainer"},
	ContainerDeleted: {ReasonRuncDeleted, "RemoveContainer"},
}

// Pod names the pod a step was for, from its sandbox's metadata.
type Pod struct {
	Namespace, Name, UID string
}

// Step is one thing the runtime did for a pod.
type Step struct {
	Kind Kind
	Pod  Pod
	// End is when the step ended; Took is how long it took.
	End  time.Time
	Took time.Duration

	// NetworkReady: the CNI network's name, the plugins ADD ran in order, the pod's
	// interface, its addresses with their prefix lengths and their gateways.
	Network   string
	Plugins   []string
	Interface string
	Addrs     []netip.Prefix
	Gateways  []netip.Addr

	// Container steps: the container's name, its init's pid (0: unknown), and for
	// ContainerStopped the signals sent in order and the exit code (when Exited).
	Container string
	Pid       int
	Signals   []string
	Exited    bool
	ExitCode  int
}

// Reason is the Event reason of the step (NetworkReady, RuncCreated, ...).
func (s Step) Reason() string { return kinds[s.Kind].reason }

// Action is the CRI call the step was part of (RunPodSandbox, StartContainer, ...): the
// Event's action.
func (s Step) Action() string { return kinds[s.Kind].action }

// Message is the Event's note: what was run and on what, its outcome and how long it took,
// e.g. "CNI kubette: bridge+host-local → eth0 10.244.0.7/24 gw 10.244.0.1 in 38ms" or
// "runc start server: pid 4242 in 12ms".
func (s Step) Message() string {
	var b strings.Builder
	switch s.Kind {
	case NetworkReady:
		fmt.Fprintf(&b, "CNI %s: %s → %s", s.Network, strings.Join(s.Plugins, "+"), s.Interface)
		if len(s.Addrs) > 0 {
			b.WriteString(" " + joinStrings(s.Addrs))
		}
		if len(s.Gateways) > 0 {
			b.WriteString(" gw " + joinStrings(s.Gateways))
		}
	case ContainerCreated:
		fmt.Fprintf(&b, "runc create %s", s.Container)
	case ContainerStarted:
		fmt.Fprintf(&b, "runc start %s", s.Container)
		if s.Pid > 0 {
			fmt.Fprintf(&b, ": pid %d", s.Pid)
		}
	case ContainerStopped:
		fmt.Fprintf(&b, "runc kill %s %s", s.Container, strings.Join(s.Signals, ", "))
		if s.Exited {
			fmt.Fprintf(&b, ": exited %d", s.ExitCode)
		}
	case ContainerDeleted:
		fmt.Fprintf(&b, "runc delete %s", s.Container)
	default:
		fmt.Fprintf(&b, "step %d", int(s.Kind))
	}
	b.WriteString(" in " + Duration(s.Took))
	return b.String()
}

// Duration formats a step's duration short: milliseconds (38ms), tenths of ms below
// 10ms (1.2ms), hundredths of seconds from a second on (1.24s).
func Duration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

func joinStrings[T fmt.Stringer](xs []T) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = x.String()
	}
	return strings.Join(parts, ",")
}
