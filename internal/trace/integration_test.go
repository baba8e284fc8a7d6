package trace_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/testenv/flowcluster"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/trace"
)

// cluster is a control plane with the Deployment and ReplicaSet controllers, the
// scheduler (each with its own certificate, as `kubette up` runs them) and one
// simulated node, all in this process.
type cluster struct {
	admin *rest.Config
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	return &cluster{admin: flowcluster.Start(t).Admin}
}

// TestTraceOfADeployment creates a 3-replica Deployment as kubectl would and checks that
// the trace holds, in this order: the create, its etcd write, the watch delivery to the
// deployment controller, the ReplicaSet create, the three pod creates, the scheduler's
// three bindings and the status updates to Running; and that the diagram is well formed.
func TestTraceOfADeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	c := startCluster(t)
	kubectl := rest.CopyConfig(c.admin)
	kubectl.UserAgent = "kubectl/v1.32.0 (linux/amd64) kubernetes/test"
	client := kubernetes.NewForConfigOrDie(kubectl)
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	_, err := client.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 3, nil
	})
	if err != nil {
		t.Fatalf("3 pods Running: %v", err)
	}

	var in trace.Input
	// The Events and the last status writes may trail the pods' phase: poll until the
	// trace has every step it must have.
	var missing string
	err = wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := trace.Collect(ctx, client, "Deployment", "default", "web")
		if err != nil {
			return false, err
		}
		in, missing = got, checkOrder(got)
		return missing == "", nil
	})
	if err != nil {
		t.Fatalf("trace incomplete: %s\nrecords:\n%s", missing, dump(in))
	}
	// TRACE_RECORD_FIXTURE=$PWD/testdata/recorded.json records this flow as the golden tests' fixture.
	if path := os.Getenv("TRACE_RECORD_FIXTURE"); path != "" {
		data, err := json.MarshalIndent(in, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, all := range []bool{false, true} {
		f := trace.Build(in, trace.Options{All: all})
		m := trace.Mermaid(f)
		if err := trace.CheckMermaid(m); err != nil {
			t.Errorf("all=%v: %v\n%s", all, err, m)
		}
		if !all {
			text := trace.Text(f)
			for _, want := range []string{
				"kubectl → API server: POST /apis/apps/v1/namespaces/default/deployments → 201",
				"API server -) deployment-controller: watch ADDED deployment default/web",
				"deployment-controller → API server: POST /apis/apps/v1/namespaces/default/replicasets → 201",
				"replicaset-controller → API server: POST /api/v1/namespaces/default/pods → 201",
				"scheduler → API server: POST /api/v1/namespaces/default/pods/",
				"[kubette-sim] podIP ",
			} {
				if !strings.Contains(text, want) {
					t.Errorf("text timeline lacks %q:\n%s", want, text)
				}
			}
			t.Logf("trace deployment/web:\n%s", text)
		}
		_ = trace.SVG(f)
	}
}

// checkOrder returns what is missing or out of order in the records, "" when the flow
// is complete: kubectl's create with its etcd write, then the delivery to the deployment
// controller, then its ReplicaSet create, then the pod creates; and for each of three
// pods its create, then the scheduler's binding, then the node's status updates (the
// pods interleave, so each pod's steps are checked in order).
func checkOrder(in trace.Input) string {
	actor := func(r trace.Record) string {
		return trace.Actor(r.User, r.UserAgent, r.FieldManager, r.Resource, r.Subresource, r.Type == trace.TypeDelivery)
	}
	first := func(after time.Time, ok func(r trace.Record) bool) (trace.Record, bool) {
		for _, r := range in.Records {
			if ok(r) && !r.Time.Before(after) {
				return r, true
			}
		}
		return trace.Record{}, false
	}
	create, found := first(time.Time{}, func(r trace.Record) bool {
		return r.Type == trace.TypeRequest && r.Verb == "create" && r.Resource == "deployments.apps" && actor(r) == "kubectl" &&
			r.Code == 201 && r.Key == "/registry/deployments/default/web" && r.WriteOp == "create" && r.Revision > 0
	})
	if !found {
		return "kubectl's create of the Deployment with its etcd write"
	}
	delivery, found := first(create.Time, func(r trace.Record) bool {
		return r.Type == trace.TypeDelivery && r.Resource == "deployments.apps" && r.EventType == "ADDED" &&
			actor(r) == "deployment-controller" && r.Revision == create.Revision
	})
	if !found {
		return "the watch delivery of the new Deployment to the deployment controller, after the create"
	}
	rsCreate, found := first(delivery.Time, func(r trace.Record) bool {
		return r.Type == trace.TypeRequest && r.Verb == "create" && r.Resource == "replicasets.apps" && actor(r) == "deployment-controller" && r.Code == 201
	})
	if !found {
		return "the deployment controller's ReplicaSet create, after the delivery"
	}
	pods := 0
	for _, pc := range in.Records {
		if !(pc.Type == trace.TypeRequest && pc.Verb == "create" && pc.Resource == "pods" && pc.Subresource == "" &&
			actor(pc) == "replicaset-controller" && pc.Code == 201 && pc.Revision > 0) {
			continue
		}
		if pc.Time.Before(rsCreate.Time) {
			return "a pod create before the ReplicaSet create"
		}
		bind, found := first(pc.Time, func(r trace.Record) bool {
			return r.Type == trace.TypeRequest && r.Name == pc.Name && r.Subresource == "binding" && actor(r) == "scheduler" && r.Code == 201
		})
		if !found {
			return "the scheduler's binding of " + pc.Name + " after its create"
		}
		if _, found := first(bind.Time, func(r trace.Record) bool {
			return r.Type == trace.TypeRequest && r.Name == pc.Name && r.Subresource == "status" && actor(r) == "kubette-sim" && r.Code == 200
		}); !found {
			return "the node's status update of " + pc.Name + " after its binding"
		}
		pods++
	}
	if pods != 3 {
		return fmt.Sprintf("three pod creates by the replicaset controller (found %d)", pods)
	}
	// Each pod's IP, with the node's status write that set it.
	bySeq := map[uint64]trace.Record{}
	for _, r := range in.Records {
		bySeq[r.Seq] = r
	}
	ips := map[string]bool{}
	for _, p := range in.PodIPs {
		w, ok := bySeq[p.Seq]
		if !ok || w.Name != p.Pod.Name || w.Subresource != "status" || actor(w) != "kubette-sim" || p.IP == "" || ips[p.IP] {
			return fmt.Sprintf("the status write that set %s's IP (got %+v, write %+v)", p.Pod.Name, p, w)
		}
		ips[p.IP] = true
	}
	if len(ips) != 3 {
		return fmt.Sprintf("three pod IPs with the writes that set them (found %d)", len(ips))
	}
	return ""
}

func dump(in trace.Input) string {
	var b strings.Builder
	for _, r := range in.Records {
		b.WriteString(r.Time.Format("15:04:05.000000") + " " + string(r.Type) + " " + r.User + " " + r.Verb + " " + r.Method + " " + r.Path + " " + r.Resource + " " + r.Name + " " + r.EventType + "\n")
	}
	return b.String()
}
