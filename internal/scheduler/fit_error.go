package scheduler

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// ErrNoNodesAvailable is the failure when the cluster has no nodes at all.
var ErrNoNodesAvailable = errors.New("no nodes available to schedule pods")

// Diagnosis records why a pod fits no node.
type Diagnosis struct {
	// NodeToStatus holds the status of each node a Filter plugin rejected.
	NodeToStatus framework.NodeToStatus
	// AbsentNodesStatus applies to every node not in NodeToStatus (set when a
	// PreFilter plugin rejected the pod for all nodes).
	AbsentNodesStatus *framework.Status
	// UnschedulablePlugins are the plugins that rejected the pod.
	UnschedulablePlugins sets.Set[string]
	// PreFilterMsg is the message of the PreFilter plugin that rejected the pod.
	PreFilterMsg string
	// PostFilterMsg is the message of the PostFilter plugins (e.g. preemption).
	PostFilterMsg string
}

// addPluginStatus records the plugin of a rejection.
func (d *Diagnosis) addPluginStatus(s *framework.Status) {
	if s.Plugin() == "" || !s.IsRejected() {
		return
	}
	if d.UnschedulablePlugins == nil {
		d.UnschedulablePlugins = sets.New[string]()
	}
	d.UnschedulablePlugins.Insert(s.Plugin())
}

// FitError is the failure when no node fits a pod. Its message has upstream's
// shape: "0/N nodes are available: <PreFilter message>. <count reason, ...>. <PostFilter message>".
type FitError struct {
	Pod         *corev1.Pod
	NumAllNodes int
	Diagnosis   Diagnosis
}

// Error returns the message as upstream: the PreFilter message, or else each
// Filter reason with the number of nodes that gave it, sorted as strings; then the
// PostFilter message and a period if a PostFilter plugin ran.
func (f *FitError) Error() string {
	var msg string
	if f.Diagnosis.PreFilterMsg != "" {
		msg = fmt.Sprintf("0/%d nodes are available: %s.", f.NumAllNodes, f.Diagnosis.PreFilterMsg)
	} else {
		msg = framework.FitMessage(f.NumAllNodes, f.Diagnosis.NodeToStatus, f.Diagnosis.AbsentNodesStatus)
	}
	if f.Diagnosis.PostFilterMsg != "" {
		// As upstream (" %v." after each part): preemption's message, which
		// ends in a period itself, ends the whole in "..".
		msg += " " + f.Diagnosis.PostFilterMsg + "."
	}
	return msg
}
