// Package kubelet is the node agent: it watches the pods bound to its node and drives them
// through a CRI runtime (sandboxes, image pulls, containers, restarts with back-off, graceful
// termination), reports their status and events to the API server, and adopts the containers a
// previous kubelet left running.
package kubelet
