package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/testenv/testimage"
)

// TestDaemonSetAndStatefulSetOnNode runs on a real node: a DaemonSet runs a real pod on
// the node (placed by the scheduler through its metadata.name node affinity), and a
// StatefulSet of 2 behind a headless Service comes up in order, web-1 only once web-0
// is ready, each pod with its stable hostname.
func TestDaemonSetAndStatefulSetOnNode(t *testing.T) {
	nc := startNodeCluster(t)
	registry := testimage.Registry(t)
	testimage.Push(t, registry, "kubette/busybox:v1", testimage.Busybox(t))
	bb := registry + "/kubette/busybox:v1"

	nc.must(t, "apply", "-f", writeFile(t, "workloads.yaml", fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: agent
        image: %[1]s
        command: ["sh", "-c", "echo agent on $NODE; exec sleep 3600"]
        env:
        - name: NODE
          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  serviceName: web
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: %[1]s
        command: ["sh", "-c", "sleep 2; touch /tmp/ready; exec sleep 3600"]
        readinessProbe:
          exec: {command: ["cat", "/tmp/ready"]}
          periodSeconds: 1
`, bb)))

	nc.must(t, "rollout", "status", "ds/agent", "--timeout=120s")
	node := nc.must(t, "get", "nodes", "-o", "jsonpath={.items[0].metadata.name}")
	pod := nc.must(t, "get", "pods", "-l", "app=agent", "-o", "jsonpath={.items[0].metadata.name}")
	p := nc.waitPod(t, pod, "Running", 60*time.Second, running)
	if p.Spec.NodeName != node {
		t.Errorf("daemon pod on %q, want %q", p.Spec.NodeName, node)
	}
	if !poll(30*time.Second, func() bool { return strings.Contains(nc.kubectl(t, "logs", pod).stdout, "agent on "+node) }) {
		t.Errorf("daemon pod's log: %q", nc.kubectl(t, "logs", pod).stdout)
	}
	if rows := tableRows(nc.must(t, "get", "ds", "agent")); len(rows) != 2 || strings.Join(rows[1][:6], " ") != "agent 1 1 1 1 1" {
		t.Errorf("kubectl get ds: %v", rows)
	}

	nc.must(t, "rollout", "status", "sts/web", "--timeout=180s")
	web0 := nc.waitPod(t, "web-0", "Ready", 30*time.Second, ready)
	web1 := nc.waitPod(t, "web-1", "Ready", 30*time.Second, ready)
	var web0Ready time.Time
	for _, c := range web0.Status.Conditions {
		if c.Type == v1.PodReady {
			web0Ready = c.LastTransitionTime.Time
		}
	}
	// Both times are in whole seconds: web-1 was made in web-0's ready second or later.
	if web1.CreationTimestamp.Time.Before(web0Ready) {
		t.Errorf("web-1 created at %v, before web-0 was ready at %v", web1.CreationTimestamp, web0Ready)
	}
	for _, name := range []string{"web-0", "web-1"} {
		if got := strings.TrimSpace(nc.must(t, "exec", name, "--", "hostname")); got != name {
			t.Errorf("hostname of %s = %q", name, got)
		}
	}
	if out := nc.must(t, "get", "sts", "web"); !strings.Contains(out, "2/2") {
		t.Errorf("kubectl get sts:\n%s", out)
	}
}
