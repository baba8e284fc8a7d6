package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/kubette/kubette/internal/testenv/testimage"
)

// TestHorizontalPodAutoscaler: `kubectl autoscale` on a Deployment whose containers
// burn CPU up to their limit scales it up to maxReplicas from the real metrics
// pipeline (the kubelet's cgroup stats → the API server's scraper → metrics.k8s.io →
// the controller → the scale subresource), with the status and event upstream writes.
// Each container is capped at 200m by its CPU limit (a cgroup quota), against a request
// of 100m, so every pod runs at about 200% of its request: the 50% target asks for
// more pods than the maximum of 3 allows, while the machine burns at most 600m.
func TestHorizontalPodAutoscaler(t *testing.T) {
	nc := startNodeCluster(t, "--metric-resolution", topResolution.String())
	registry := testimage.Registry(t)
	busybox := registry + "/kubette/busybox:v1"
	testimage.Push(t, registry, "kubette/busybox:v1", testimage.Busybox(t))
	nc.must(t, "apply", "-f", writeFile(t, "burn.yaml", fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: burn}
spec:
  replicas: 1
  selector: {matchLabels: {app: burn}}
  template:
    metadata: {labels: {app: burn}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: burn
        image: %s
        command: [sh, -c, "while :; do :; done"]
        resources:
          requests: {cpu: 100m}
          limits: {cpu: 200m}
`, busybox)))
	nc.must(t, "autoscale", "deployment", "burn", "--cpu-percent=50", "--min=1", "--max=3")

	var hpa autoscalingv2.HorizontalPodAutoscaler
	get := func() bool {
		r := nc.kubectl(t, "get", "hpa.v2.autoscaling", "burn", "-o", "json")
		if r.err != nil {
			return false
		}
		if err := json.Unmarshal([]byte(r.stdout), &hpa); err != nil {
			t.Fatalf("decode hpa: %v\n%s", err, r.stdout)
		}
		return true
	}
	if !poll(4*time.Minute, func() bool {
		return get() && hpa.Status.DesiredReplicas == 3 && hpa.Status.CurrentReplicas == 3
	}) {
		t.Fatalf("the autoscaler did not reach 3 replicas:\n%s\n%s\nevents:\n%s", nc.kubectl(t, "get", "hpa", "burn", "-o", "yaml").stdout,
			nc.kubectl(t, "top", "pod").stdout, nc.kubectl(t, "get", "events", "--field-selector", "involvedObject.kind=HorizontalPodAutoscaler").stdout)
	}
	if got := nc.must(t, "get", "deployment", "burn", "-o", "jsonpath={.spec.replicas}"); got != "3" {
		t.Errorf("deployment burn spec.replicas = %s, want 3", got)
	}
	if hpa.Status.LastScaleTime == nil {
		t.Error("status.lastScaleTime is not set")
	}
	if len(hpa.Status.CurrentMetrics) != 1 || hpa.Status.CurrentMetrics[0].Resource == nil ||
		hpa.Status.CurrentMetrics[0].Resource.Current.AverageUtilization == nil ||
		*hpa.Status.CurrentMetrics[0].Resource.Current.AverageUtilization <= 50 {
		t.Errorf("status.currentMetrics = %+v, want cpu utilization above the 50%% target", hpa.Status.CurrentMetrics)
	}
	conds := map[autoscalingv2.HorizontalPodAutoscalerConditionType]autoscalingv2.HorizontalPodAutoscalerCondition{}
	for _, c := range hpa.Status.Conditions {
		conds[c.Type] = c
	}
	if c := conds[autoscalingv2.ScalingActive]; c.Status != "True" || c.Reason != "ValidMetricFound" {
		t.Errorf("ScalingActive = %+v, want True ValidMetricFound", c)
	}
	if c := conds[autoscalingv2.ScalingLimited]; c.Status != "True" || c.Reason != "TooManyReplicas" {
		t.Errorf("ScalingLimited = %+v, want True TooManyReplicas", c)
	}
	events := nc.must(t, "get", "events", "--field-selector", "involvedObject.name=burn,reason=SuccessfulRescale", "-o", "jsonpath={.items[*].message}")
	if !strings.Contains(events, "cpu resource utilization (percentage of request) above target") {
		t.Errorf("SuccessfulRescale events: %q", events)
	}
	// kubectl's table of the v2 object: the reference and the target beside the usage.
	out := nc.must(t, "get", "hpa", "burn")
	if !strings.Contains(out, "Deployment/burn") || !strings.Contains(out, "/50%") {
		t.Errorf("kubectl get hpa burn:\n%s", out)
	}
}
