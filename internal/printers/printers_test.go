package printers

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	now     = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	created = metav1.NewTime(now.Add(-10 * time.Minute))
)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func ptr[T any](v T) *T { return &v }

func objMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: created}
}

// mustFor returns the printer of gr or fails the test.
func mustFor(t *testing.T, gr schema.GroupResource) Printer {
	t.Helper()
	p, ok := For(gr)
	if !ok {
		t.Fatalf("For(%v): no printer", gr)
	}
	return p
}

// cells runs the printer's Row and checks the cell count.
func cells(t *testing.T, p Printer, obj runtime.Object) []interface{} {
	t.Helper()
	c, err := p.Row(obj, now)
	if err != nil {
		t.Fatalf("Row(%T): %v", obj, err)
	}
	if len(c) != len(p.Columns) {
		t.Fatalf("Row(%T) returned %d cells for %d columns", obj, len(c), len(p.Columns))
	}
	return c
}

// byName returns the cells keyed by lower-cased column name.
func byName(p Printer, c []interface{}) map[string]interface{} {
	m := make(map[string]interface{}, len(c))
	for i, col := range p.Columns {
		m[strings.ToLower(col.Name)] = c[i]
	}
	return m
}

// columnNames renders the header line kubectl would show (wide columns
// after a "|").
func columnNames(p Printer) string {
	var normal, wide []string
	for _, c := range p.Columns {
		if c.Priority == 0 {
			normal = append(normal, strings.ToUpper(c.Name))
		} else {
			wide = append(wide, strings.ToUpper(c.Name))
		}
	}
	s := strings.Join(normal, " ")
	if len(wide) > 0 {
		s += " | " + strings.Join(wide, " ")
	}
	return s
}

func TestColumns(t *testing.T) {
	tests := []struct {
		gr   schema.GroupResource
		want string
	}{
		{schema.GroupResource{Resource: "pods"}, "NAME READY STATUS RESTARTS AGE | IP NODE NOMINATED NODE READINESS GATES"},
		{schema.GroupResource{Resource: "nodes"}, "NAME STATUS ROLES AGE VERSION | INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME"},
		{schema.GroupResource{Resource: "namespaces"}, "NAME STATUS AGE"},
		{schema.GroupResource{Resource: "services"}, "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE | SELECTOR"},
		{schema.GroupResource{Resource: "endpoints"}, "NAME ENDPOINTS AGE"},
		{schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "NAME ADDRESSTYPE PORTS ENDPOINTS AGE"},
		{schema.GroupResource{Resource: "configmaps"}, "NAME DATA AGE"},
		{schema.GroupResource{Resource: "secrets"}, "NAME TYPE DATA AGE"},
		{schema.GroupResource{Resource: "serviceaccounts"}, "NAME SECRETS AGE"},
		{schema.GroupResource{Resource: "events"}, "LAST SEEN TYPE REASON OBJECT MESSAGE | SUBOBJECT SOURCE FIRST SEEN COUNT NAME"},
		{schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "LAST SEEN TYPE REASON OBJECT MESSAGE | SUBOBJECT SOURCE FIRST SEEN COUNT NAME"},
		{schema.GroupResource{Group: "apps", Resource: "deployments"}, "NAME READY UP-TO-DATE AVAILABLE AGE | CONTAINERS IMAGES SELECTOR"},
		{schema.GroupResource{Group: "apps", Resource: "replicasets"}, "NAME DESIRED CURRENT READY AGE | CONTAINERS IMAGES SELECTOR"},
		{schema.GroupResource{Group: "apps", Resource: "daemonsets"}, "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE | CONTAINERS IMAGES SELECTOR"},
		{schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "NAME READY AGE | CONTAINERS IMAGES"},
		{schema.GroupResource{Group: "apps", Resource: "controllerrevisions"}, "NAME CONTROLLER REVISION AGE"},
		{schema.GroupResource{Resource: "replicationcontrollers"}, "NAME DESIRED CURRENT READY AGE | CONTAINERS IMAGES SELECTOR"},
		{schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, "NAME CLASS HOSTS ADDRESS PORTS AGE"},
		{schema.GroupResource{Group: "networking.k8s.io", Resource: "ingressclasses"}, "NAME CONTROLLER PARAMETERS AGE"},
		{schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "NAME HOLDER AGE"},
	}
	for _, tt := range tests {
		t.Run(tt.gr.String(), func(t *testing.T) {
			p := mustFor(t, tt.gr)
			if got := columnNames(p); got != tt.want {
				t.Errorf("columns = %q, want %q", got, tt.want)
			}
			names := 0
			for _, c := range p.Columns {
				if c.Description == "" {
					t.Errorf("column %q has no description", c.Name)
				}
				if c.Type != "string" && c.Type != "integer" {
					t.Errorf("column %q has type %q", c.Name, c.Type)
				}
				if c.Format == "name" {
					names++
					if c.Name != "Name" {
						t.Errorf("column %q has format name", c.Name)
					}
				}
			}
			if names != 1 {
				t.Errorf("%d columns with format name, want 1", names)
			}
		})
	}
}

func TestForUnknown(t *testing.T) {
	for _, gr := range []schema.GroupResource{
		{Resource: "widgets"},
		{Group: "apps", Resource: "pods"},
		{Group: "example.com", Resource: "deployments"},
		{Group: "apps", Resource: "widgetsets"},
	} {
		if _, ok := For(gr); ok {
			t.Errorf("For(%v) = ok, want no printer", gr)
		}
	}
}

func TestForReturnsIndependentPrinters(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	a := mustFor(t, gr)
	a.Columns[0].Name = "mutated"
	if b := mustFor(t, gr); b.Columns[0].Name != "Name" {
		t.Fatalf("mutating a returned printer changed later ones: %q", b.Columns[0].Name)
	}
}

func running(name string, ready bool) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Ready: ready, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func waiting(name, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

func terminated(name string, t corev1.ContainerStateTerminated) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &t}}
}

func containers(names ...string) []corev1.Container {
	out := make([]corev1.Container, len(names))
	for i, n := range names {
		out[i] = corev1.Container{Name: n, Image: n + ":latest"}
	}
	return out
}

func TestPodRows(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	tests := []struct {
		name     string
		pod      corev1.Pod
		ready    string
		status   string
		restarts string
	}{
		{
			name: "running",
			pod: corev1.Pod{
				Spec:   corev1.PodSpec{Containers: containers("app")},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{running("app", true)}},
			},
			ready: "1/1", status: "Running", restarts: "0",
		},
		{
			name: "pending without statuses",
			pod: corev1.Pod{
				Spec:   corev1.PodSpec{Containers: containers("a", "b")},
				Status: corev1.PodStatus{Phase: corev1.PodPending},
			},
			ready: "0/2", status: "Pending", restarts: "0",
		},
		{
			name: "crash loop back-off with restarts 5m ago",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{Containers: containers("app")},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
					Name:                 "app",
					RestartCount:         4,
					State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: ago(5 * time.Minute)}},
				}}},
			},
			ready: "0/1", status: "CrashLoopBackOff", restarts: "4 (5m ago)",
		},
		{
			name: "latest restart across containers",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{Containers: containers("a", "b")},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
					{Name: "a", Ready: true, RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
						LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: ago(3 * time.Hour)}}},
					{Name: "b", Ready: true, RestartCount: 3, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
						LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: ago(90 * time.Second)}}},
				}},
			},
			ready: "2/2", status: "Running", restarts: "5 (90s ago)",
		},
		{
			name: "restarts without a termination time",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{Containers: containers("app")},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
					{Name: "app", Ready: true, RestartCount: 3, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
				}},
			},
			ready: "1/1", status: "Running", restarts: "3",
		},
		{
			name: "init 0/2",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{InitContainers: containers("i1", "i2"), Containers: containers("app")},
				Status: corev1.PodStatus{
					Phase: corev1.PodPending,
					InitContainerStatuses: []corev1.ContainerStatus{
						{Name: "i1", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
						waiting("i2", "PodInitializing"),
					},
					ContainerStatuses: []corev1.ContainerStatus{waiting("app", "PodInitializing")},
				},
			},
			ready: "0/1", status: "Init:0/2", restarts: "0",
		},
		{
			name: "init 1/2",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{InitContainers: containers("i1", "i2"), Containers: containers("app")},
				Status: corev1.PodStatus{
					Phase: corev1.PodPending,
					InitContainerStatuses: []corev1.ContainerStatus{
						terminated("i1", corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}),
						waiting("i2", "PodInitializing"),
					},
				},
			},
			ready: "0/1", status: "Init:1/2", restarts: "0",
		},
		{
			name: "init crash loop counts init restarts only",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{InitContainers: containers("i1"), Containers: containers("app")},
				Status: corev1.PodStatus{
					Phase: corev1.PodPending,
					InitContainerStatuses: []corev1.ContainerStatus{{
						Name: "i1", RestartCount: 3,
						State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
						LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: ago(2 * time.Minute)}},
					}},
					ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: 7, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}},
				},
			},
			ready: "0/1", status: "Init:CrashLoopBackOff", restarts: "3 (2m ago)",
		},
		{
			name: "init failed with exit code",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{InitContainers: containers("i1"), Containers: containers("app")},
				Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
					terminated("i1", corev1.ContainerStateTerminated{ExitCode: 2}),
				}},
			},
			ready: "0/1", status: "Init:ExitCode:2", restarts: "0",
		},
		{
			name: "init killed by signal",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{InitContainers: containers("i1"), Containers: containers("app")},
				Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
					terminated("i1", corev1.ContainerStateTerminated{ExitCode: 137, Signal: 9}),
				}},
			},
			ready: "0/1", status: "Init:Signal:9", restarts: "0",
		},
		{
			name: "init failed with reason",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{InitContainers: containers("i1"), Containers: containers("app")},
				Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
					terminated("i1", corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}),
				}},
			},
			ready: "0/1", status: "Init:Error", restarts: "0",
		},
		{
			name: "completed",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{Containers: containers("job")},
				Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{
					terminated("job", corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}),
				}},
			},
			ready: "0/1", status: "Completed", restarts: "0",
		},
		{
			name: "completed container while another runs and pod ready",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{Containers: containers("a", "b")},
				Status: corev1.PodStatus{
					Phase:      corev1.PodRunning,
					Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
					ContainerStatuses: []corev1.ContainerStatus{
						terminated("a", corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}),
						running("b", true),
					},
				},
			},
			ready: "1/2", status: "Running", restarts: "0",
		},
		{
			name: "completed container while another runs and pod not ready",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{Containers: containers("a", "b")},
				Status: corev1.PodStatus{
					Phase: corev1.PodRunning,
					ContainerStatuses: []corev1.ContainerStatus{
						terminated("a", corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}),
						running("b", true),
					},
				},
			},
			ready: "1/2", status: "NotReady", restarts: "0",
		},
		{
			name: "exit code",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{Containers: containers("app")},
				Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
					terminated("app", corev1.ContainerStateTerminated{ExitCode: 1}),
				}},
			},
			ready: "0/1", status: "ExitCode:1", restarts: "0",
		},
		{
			name: "signal",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{Containers: containers("app")},
				Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
					terminated("app", corev1.ContainerStateTerminated{ExitCode: 137, Signal: 9}),
				}},
			},
			ready: "0/1", status: "Signal:9", restarts: "0",
		},
		{
			name: "terminated reason",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{Containers: containers("app")},
				Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
					terminated("app", corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}),
				}},
			},
			ready: "0/1", status: "OOMKilled", restarts: "0",
		},
		{
			name: "image pull back-off on the first container wins",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{Containers: containers("a", "b")},
				Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
					waiting("a", "ImagePullBackOff"),
					waiting("b", "ContainerCreating"),
				}},
			},
			ready: "0/2", status: "ImagePullBackOff", restarts: "0",
		},
		{
			name: "terminating",
			pod: corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr(ago(time.Second))},
				Spec:       corev1.PodSpec{Containers: containers("app")},
				Status:     corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{running("app", true)}},
			},
			ready: "1/1", status: "Terminating", restarts: "0",
		},
		{
			name: "deleted but already succeeded keeps completed",
			pod: corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr(ago(time.Second))},
				Spec:       corev1.PodSpec{Containers: containers("app")},
				Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{
					terminated("app", corev1.ContainerStateTerminated{Reason: "Completed"}),
				}},
			},
			ready: "0/1", status: "Completed", restarts: "0",
		},
		{
			name: "node lost",
			pod: corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr(ago(time.Second))},
				Spec:       corev1.PodSpec{Containers: containers("app")},
				Status:     corev1.PodStatus{Phase: corev1.PodRunning, Reason: "NodeLost"},
			},
			ready: "0/1", status: "Unknown", restarts: "0",
		},
		{
			name: "status reason",
			pod: corev1.Pod{
				Spec:   corev1.PodSpec{Containers: containers("app")},
				Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"},
			},
			ready: "0/1", status: "Evicted", restarts: "0",
		},
		{
			name: "scheduling gated",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{Containers: containers("app"), SchedulingGates: []corev1.PodSchedulingGate{{Name: "example.com/gate"}}},
				Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
					{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated},
				}},
			},
			ready: "0/1", status: "SchedulingGated", restarts: "0",
		},
		{
			name: "started sidecar counts as a container",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{
					InitContainers: []corev1.Container{{Name: "proxy", RestartPolicy: &always}},
					Containers:     containers("app"),
				},
				Status: corev1.PodStatus{
					Phase:      corev1.PodRunning,
					Conditions: []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}},
					InitContainerStatuses: []corev1.ContainerStatus{{
						Name: "proxy", Ready: true, Started: ptr(true), RestartCount: 1,
						State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
						LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: ago(time.Hour)}},
					}},
					ContainerStatuses: []corev1.ContainerStatus{running("app", true)},
				},
			},
			ready: "2/2", status: "Running", restarts: "1 (60m ago)",
		},
	}
	p := mustFor(t, schema.GroupResource{Resource: "pods"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.pod.Name = "p"
			tt.pod.CreationTimestamp = created
			got := byName(p, cells(t, p, &tt.pod))
			if got["ready"] != tt.ready || got["status"] != tt.status || got["restarts"] != tt.restarts {
				t.Errorf("READY/STATUS/RESTARTS = %v/%v/%v, want %v/%v/%v",
					got["ready"], got["status"], got["restarts"], tt.ready, tt.status, tt.restarts)
			}
			if got["name"] != "p" || got["age"] != "10m" {
				t.Errorf("NAME/AGE = %v/%v", got["name"], got["age"])
			}
		})
	}
}

func TestPodWideColumns(t *testing.T) {
	p := mustFor(t, schema.GroupResource{Resource: "pods"})
	pod := &corev1.Pod{
		ObjectMeta: objMeta("web"),
		Spec: corev1.PodSpec{
			NodeName:       "node-1",
			Containers:     containers("app"),
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/a"}, {ConditionType: "example.com/b"}},
		},
		Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			PodIP:             "10.0.0.9",
			PodIPs:            []corev1.PodIP{{IP: "10.0.0.9"}, {IP: "fd00::9"}},
			NominatedNodeName: "node-2",
			Conditions: []corev1.PodCondition{
				{Type: "example.com/a", Status: corev1.ConditionTrue},
				{Type: "example.com/b", Status: corev1.ConditionFalse},
			},
			ContainerStatuses: []corev1.ContainerStatus{running("app", true)},
		},
	}
	want := []interface{}{"web", "1/1", "Running", "0", "10m", "10.0.0.9", "node-1", "node-2", "1/2"}
	if got := cells(t, p, pod); !reflect.DeepEqual(got, want) {
		t.Errorf("cells = %#v, want %#v", got, want)
	}

	bare := &corev1.Pod{ObjectMeta: objMeta("bare"), Status: corev1.PodStatus{PodIP: "10.1.1.1"}}
	want = []interface{}{"bare", "0/0", "", "0", "10m", "10.1.1.1", "<none>", "<none>", "<none>"}
	if got := cells(t, p, bare); !reflect.DeepEqual(got, want) {
		t.Errorf("cells = %#v, want %#v", got, want)
	}
}

func TestPodRowConditions(t *testing.T) {
	p := mustFor(t, schema.GroupResource{Resource: "pods"})
	objs := []runtime.Object{
		&corev1.Pod{ObjectMeta: objMeta("ok"), Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
		&corev1.Pod{ObjectMeta: objMeta("bad"), Status: corev1.PodStatus{Phase: corev1.PodFailed}},
		&corev1.Pod{ObjectMeta: objMeta("run"), Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	}
	table, err := Table(p, objs, now)
	if err != nil {
		t.Fatal(err)
	}
	wantReasons := []string{"Succeeded", "Failed", ""}
	for i, row := range table.Rows {
		reason := ""
		if len(row.Conditions) > 0 {
			c := row.Conditions[0]
			if c.Type != metav1.RowCompleted || c.Status != metav1.ConditionTrue {
				t.Errorf("row %d: condition %+v", i, c)
			}
			reason = c.Reason
		}
		if reason != wantReasons[i] {
			t.Errorf("row %d: completed reason %q, want %q", i, reason, wantReasons[i])
		}
	}
}

func TestNodeRows(t *testing.T) {
	p := mustFor(t, schema.GroupResource{Resource: "nodes"})
	ready := func(s corev1.ConditionStatus) []corev1.NodeCondition {
		return []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: s},
		}
	}
	tests := []struct {
		name   string
		node   corev1.Node
		status string
		roles  string
	}{
		{"ready without roles", corev1.Node{Status: corev1.NodeStatus{Conditions: ready(corev1.ConditionTrue)}}, "Ready", "<none>"},
		{"not ready", corev1.Node{Status: corev1.NodeStatus{Conditions: ready(corev1.ConditionFalse)}}, "NotReady", "<none>"},
		{"ready unknown", corev1.Node{Status: corev1.NodeStatus{Conditions: ready(corev1.ConditionUnknown)}}, "NotReady", "<none>"},
		{"no ready condition", corev1.Node{}, "Unknown", "<none>"},
		{
			"cordoned control plane",
			corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
					"node-role.kubernetes.io/control-plane": "",
					"node-role.kubernetes.io/etcd":          "true",
					"node-role.kubernetes.io/":              "",
					"kubernetes.io/hostname":                "n1",
				}},
				Spec:   corev1.NodeSpec{Unschedulable: true},
				Status: corev1.NodeStatus{Conditions: ready(corev1.ConditionTrue)},
			},
			"Ready,SchedulingDisabled", "control-plane,etcd",
		},
		{
			"legacy role label",
			corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kubernetes.io/role": "worker", "node-role.kubernetes.io/worker": ""}},
				Spec:       corev1.NodeSpec{Unschedulable: true},
			},
			"Unknown,SchedulingDisabled", "worker",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := byName(p, cells(t, p, &tt.node))
			if got["status"] != tt.status || got["roles"] != tt.roles {
				t.Errorf("STATUS/ROLES = %v/%v, want %v/%v", got["status"], got["roles"], tt.status, tt.roles)
			}
		})
	}

	node := &corev1.Node{
		ObjectMeta: objMeta("n1"),
		Status: corev1.NodeStatus{
			Conditions: ready(corev1.ConditionTrue),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeHostName, Address: "n1"},
				{Type: corev1.NodeInternalIP, Address: "192.168.1.10"},
				{Type: corev1.NodeInternalIP, Address: "192.168.1.11"},
			},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.32.0", OSImage: "Debian GNU/Linux 12", KernelVersion: "6.1.0"},
		},
	}
	want := []interface{}{"n1", "Ready", "<none>", "10m", "v1.32.0", "192.168.1.10", "<none>", "Debian GNU/Linux 12", "6.1.0", "<unknown>"}
	if got := cells(t, p, node); !reflect.DeepEqual(got, want) {
		t.Errorf("cells = %#v, want %#v", got, want)
	}
}

func TestServiceRows(t *testing.T) {
	p := mustFor(t, schema.GroupResource{Resource: "services"})
	tests := []struct {
		name string
		svc  corev1.Service
		want []interface{}
	}{
		{
			"cluster IP",
			corev1.Service{Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
				Ports:    []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP}, {Port: 53, Protocol: corev1.ProtocolTCP}, {Port: 9153, Protocol: corev1.ProtocolTCP}},
				Selector: map[string]string{"k8s-app": "kube-dns"},
			}},
			[]interface{}{"s", "ClusterIP", "10.96.0.10", "<none>", "53/UDP,53/TCP,9153/TCP", "10m", "k8s-app=kube-dns"},
		},
		{
			"node port",
			corev1.Service{Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeNodePort, ClusterIPs: []string{"10.96.1.1"},
				Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}, {Port: 443, NodePort: 30443}},
			}},
			[]interface{}{"s", "NodePort", "10.96.1.1", "<none>", "80:30080/TCP,443:30443/TCP", "10m", "<none>"},
		},
		{
			"headless without ports",
			corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "None", ClusterIPs: []string{"None"}}},
			[]interface{}{"s", "ClusterIP", "None", "<none>", "<none>", "10m", "<none>"},
		},
		{
			"external IPs",
			corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.0.0.1", ExternalIPs: []string{"1.2.3.4", "5.6.7.8"}, Ports: []corev1.ServicePort{{Port: 80, Protocol: "TCP"}}}},
			[]interface{}{"s", "ClusterIP", "10.0.0.1", "1.2.3.4,5.6.7.8", "80/TCP", "10m", "<none>"},
		},
		{
			"load balancer pending",
			corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIPs: []string{"10.0.0.2"}, Ports: []corev1.ServicePort{{Port: 80, NodePort: 31000, Protocol: "TCP"}}}},
			[]interface{}{"s", "LoadBalancer", "10.0.0.2", "<pending>", "80:31000/TCP", "10m", "<none>"},
		},
		{
			"load balancer with ingress and external IP",
			corev1.Service{
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIPs: []string{"10.0.0.3"}, ExternalIPs: []string{"9.9.9.9"}},
				Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
					{IP: "203.0.113.7"}, {Hostname: "lb.example.com"}, {IP: "203.0.113.5"}, {IP: "203.0.113.7"},
				}}},
			},
			[]interface{}{"s", "LoadBalancer", "10.0.0.3", "203.0.113.5,203.0.113.7,lb.example.com,9.9.9.9", "<none>", "10m", "<none>"},
		},
		{
			"external name",
			corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}},
			[]interface{}{"s", "ExternalName", "<none>", "db.example.com", "<none>", "10m", "<none>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.svc.ObjectMeta = objMeta("s")
			if got := cells(t, p, &tt.svc); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("cells = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func addrs(ips ...string) []corev1.EndpointAddress {
	out := make([]corev1.EndpointAddress, len(ips))
	for i, ip := range ips {
		out[i] = corev1.EndpointAddress{IP: ip}
	}
	return out
}

func TestEndpointsRows(t *testing.T) {
	p := mustFor(t, schema.GroupResource{Resource: "endpoints"})
	tests := []struct {
		name    string
		subsets []corev1.EndpointSubset
		want    string
	}{
		{"none", nil, "<none>"},
		{"subset without addresses", []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80}}}}, ""},
		{"two", []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2"), Ports: []corev1.EndpointPort{{Port: 80}}}}, "10.0.0.1:80,10.0.0.2:80"},
		{"exactly three", []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2", "10.0.0.3"), Ports: []corev1.EndpointPort{{Port: 80}}}}, "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80"},
		{
			"more",
			[]corev1.EndpointSubset{
				{Addresses: addrs("10.0.0.1", "10.0.0.2"), Ports: []corev1.EndpointPort{{Port: 80}, {Port: 443}}},
				{Addresses: addrs("10.0.0.3"), Ports: []corev1.EndpointPort{{Port: 8080}}},
			},
			"10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 2 more...",
		},
		{
			"five with more",
			[]corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"), Ports: []corev1.EndpointPort{{Port: 80}}}},
			"10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 3 more...",
		},
		{"headless without ports", []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2")}}, "10.0.0.1,10.0.0.2"},
		{"ipv6", []corev1.EndpointSubset{{Addresses: addrs("fd00::1"), Ports: []corev1.EndpointPort{{Port: 80}}}}, "[fd00::1]:80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := &corev1.Endpoints{ObjectMeta: objMeta("ep"), Subsets: tt.subsets}
			want := []interface{}{"ep", tt.want, "10m"}
			if got := cells(t, p, ep); !reflect.DeepEqual(got, want) {
				t.Errorf("cells = %#v, want %#v", got, want)
			}
		})
	}
}

func TestEndpointSliceRows(t *testing.T) {
	p := mustFor(t, schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"})
	tests := []struct {
		name  string
		slice discoveryv1.EndpointSlice
		want  []interface{}
	}{
		{
			"empty",
			discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4},
			[]interface{}{"es", "IPv4", "<unset>", "<unset>", "10m"},
		},
		{
			"ports and endpoints",
			discoveryv1.EndpointSlice{
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Port: ptr(int32(80))}, {Name: ptr("metrics")}, {}},
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}, {Addresses: []string{"10.0.0.2"}}},
			},
			[]interface{}{"es", "IPv4", "80,metrics,*", "10.0.0.1,10.0.0.2", "10m"},
		},
		{
			"more",
			discoveryv1.EndpointSlice{
				AddressType: discoveryv1.AddressTypeIPv6,
				Ports:       []discoveryv1.EndpointPort{{Port: ptr(int32(1))}, {Port: ptr(int32(2))}, {Port: ptr(int32(3))}, {Port: ptr(int32(4))}},
				Endpoints: []discoveryv1.Endpoint{
					{Addresses: []string{"fd00::1", "fd00::2"}}, {Addresses: []string{"fd00::3"}}, {Addresses: []string{"fd00::4"}}, {Addresses: []string{"fd00::5"}},
				},
			},
			[]interface{}{"es", "IPv6", "1,2,3 + 1 more...", "fd00::1,fd00::2,fd00::3 + 2 more...", "10m"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.slice.ObjectMeta = objMeta("es")
			if got := cells(t, p, &tt.slice); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("cells = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestSimpleCoreRows(t *testing.T) {
	tests := []struct {
		name string
		gr   schema.GroupResource
		obj  runtime.Object
		want []interface{}
	}{
		{
			"namespace",
			schema.GroupResource{Resource: "namespaces"},
			&corev1.Namespace{ObjectMeta: objMeta("kube-system"), Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
			[]interface{}{"kube-system", "Active", "10m"},
		},
		{
			"terminating namespace",
			schema.GroupResource{Resource: "namespaces"},
			&corev1.Namespace{ObjectMeta: objMeta("old"), Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
			[]interface{}{"old", "Terminating", "10m"},
		},
		{
			"configmap",
			schema.GroupResource{Resource: "configmaps"},
			&corev1.ConfigMap{ObjectMeta: objMeta("cm"), Data: map[string]string{"a": "1", "b": "2"}, BinaryData: map[string][]byte{"c": {1}}},
			[]interface{}{"cm", int64(3), "10m"},
		},
		{
			"secret",
			schema.GroupResource{Resource: "secrets"},
			&corev1.Secret{ObjectMeta: objMeta("tls"), Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": nil, "tls.key": nil}},
			[]interface{}{"tls", "kubernetes.io/tls", int64(2), "10m"},
		},
		{
			"service account",
			schema.GroupResource{Resource: "serviceaccounts"},
			&corev1.ServiceAccount{ObjectMeta: objMeta("default"), Secrets: []corev1.ObjectReference{{Name: "tok"}}},
			[]interface{}{"default", int64(1), "10m"},
		},
		{
			"lease",
			schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"},
			&coordinationv1.Lease{ObjectMeta: objMeta("kube-scheduler"), Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("node-1_abc")}},
			[]interface{}{"kube-scheduler", "node-1_abc", "10m"},
		},
		{
			"lease without holder",
			schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"},
			&coordinationv1.Lease{ObjectMeta: objMeta("free")},
			[]interface{}{"free", "", "10m"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustFor(t, tt.gr)
			if got := cells(t, p, tt.obj); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("cells = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestEventRows(t *testing.T) {
	tests := []struct {
		name string
		gr   schema.GroupResource
		obj  runtime.Object
		want []interface{}
	}{
		{
			"core event",
			schema.GroupResource{Resource: "events"},
			&corev1.Event{
				ObjectMeta:     objMeta("web.17a"),
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", FieldPath: "spec.containers{app}"},
				Reason:         "BackOff",
				Message:        "Back-off restarting failed container\n",
				Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
				FirstTimestamp: ago(time.Hour),
				LastTimestamp:  ago(2 * time.Minute),
				Count:          12,
				Type:           corev1.EventTypeWarning,
			},
			[]interface{}{"2m", "Warning", "BackOff", "pod/web", "spec.containers{app}", "kubelet, node-1", "Back-off restarting failed container", "60m", int64(12), "web.17a"},
		},
		{
			"new-style core event",
			schema.GroupResource{Resource: "events"},
			&corev1.Event{
				ObjectMeta:          objMeta("ns.1"),
				InvolvedObject:      corev1.ObjectReference{Kind: "Node"},
				Reason:              "Starting",
				EventTime:           metav1.NewMicroTime(now.Add(-30 * time.Second)),
				ReportingController: "kubette",
				Type:                corev1.EventTypeNormal,
			},
			[]interface{}{"30s", "Normal", "Starting", "node", "", "kubette", "", "30s", int64(1), "ns.1"},
		},
		{
			"core event series",
			schema.GroupResource{Resource: "events"},
			&corev1.Event{
				ObjectMeta:          objMeta("s.1"),
				InvolvedObject:      corev1.ObjectReference{Kind: "Deployment", Name: "web"},
				EventTime:           metav1.NewMicroTime(now.Add(-3 * time.Hour)),
				Series:              &corev1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(now.Add(-5 * time.Second))},
				ReportingController: "ctrl",
				ReportingInstance:   "ctrl-0",
			},
			[]interface{}{"5s", "", "", "deployment/web", "", "ctrl, ctrl-0", "", "3h", int64(7), "s.1"},
		},
		{
			"events.k8s.io event",
			schema.GroupResource{Group: "events.k8s.io", Resource: "events"},
			&eventsv1.Event{
				ObjectMeta:          objMeta("web.2"),
				EventTime:           metav1.NewMicroTime(now.Add(-4 * time.Minute)),
				Series:              &eventsv1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(now.Add(-1 * time.Minute))},
				ReportingController: "kubelet",
				ReportingInstance:   "node-2",
				Action:              "Pulling",
				Reason:              "Pulling",
				Regarding:           corev1.ObjectReference{Kind: "Pod", Name: "web", FieldPath: "spec.containers{app}"},
				Note:                "Pulling image nginx",
				Type:                corev1.EventTypeNormal,
			},
			[]interface{}{"60s", "Normal", "Pulling", "pod/web", "spec.containers{app}", "kubelet, node-2", "Pulling image nginx", "4m", int64(3), "web.2"},
		},
		{
			"events.k8s.io event with deprecated fields",
			schema.GroupResource{Group: "events.k8s.io", Resource: "events"},
			&eventsv1.Event{
				ObjectMeta:               objMeta("old.1"),
				Regarding:                corev1.ObjectReference{Kind: "Pod", Name: "p"},
				Note:                     "hello",
				DeprecatedSource:         corev1.EventSource{Component: "scheduler"},
				DeprecatedFirstTimestamp: ago(20 * time.Minute),
				DeprecatedLastTimestamp:  ago(10 * time.Minute),
				DeprecatedCount:          4,
				Type:                     corev1.EventTypeNormal,
				Reason:                   "Scheduled",
			},
			[]interface{}{"10m", "Normal", "Scheduled", "pod/p", "", "scheduler", "hello", "20m", int64(4), "old.1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustFor(t, tt.gr)
			if got := cells(t, p, tt.obj); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("cells = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestWorkloadRows(t *testing.T) {
	template := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "web", Image: "nginx:1.27"}, {Name: "sidecar", Image: "busybox"},
	}}}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	tests := []struct {
		name string
		gr   schema.GroupResource
		obj  runtime.Object
		want []interface{}
	}{
		{
			"deployment",
			schema.GroupResource{Group: "apps", Resource: "deployments"},
			&appsv1.Deployment{
				ObjectMeta: objMeta("web"),
				Spec:       appsv1.DeploymentSpec{Replicas: ptr(int32(3)), Selector: selector, Template: template},
				Status:     appsv1.DeploymentStatus{Replicas: 3, ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2},
			},
			[]interface{}{"web", "2/3", int64(3), int64(2), "10m", "web,sidecar", "nginx:1.27,busybox", "app=web"},
		},
		{
			"deployment with unset replicas and invalid selector",
			schema.GroupResource{Group: "apps", Resource: "deployments"},
			&appsv1.Deployment{
				ObjectMeta: objMeta("odd"),
				Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "app", Operator: "Bogus"},
				}}},
			},
			[]interface{}{"odd", "0/1", int64(0), int64(0), "10m", "", "", "<invalid>"},
		},
		{
			"replica set",
			schema.GroupResource{Group: "apps", Resource: "replicasets"},
			&appsv1.ReplicaSet{
				ObjectMeta: objMeta("web-5d8"),
				Spec:       appsv1.ReplicaSetSpec{Replicas: ptr(int32(3)), Selector: selector, Template: template},
				Status:     appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 1},
			},
			[]interface{}{"web-5d8", int64(3), int64(3), int64(1), "10m", "web,sidecar", "nginx:1.27,busybox", "app=web"},
		},
		{
			"replica set without selector",
			schema.GroupResource{Group: "apps", Resource: "replicasets"},
			&appsv1.ReplicaSet{ObjectMeta: objMeta("bare"), Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(0))}},
			[]interface{}{"bare", int64(0), int64(0), int64(0), "10m", "", "", "<none>"},
		},
		{
			"replication controller",
			schema.GroupResource{Resource: "replicationcontrollers"},
			&corev1.ReplicationController{
				ObjectMeta: objMeta("update-demo"),
				Spec:       corev1.ReplicationControllerSpec{Replicas: ptr(int32(2)), Selector: map[string]string{"name": "update-demo", "app": "x"}, Template: &template},
				Status:     corev1.ReplicationControllerStatus{Replicas: 2, ReadyReplicas: 1},
			},
			[]interface{}{"update-demo", int64(2), int64(2), int64(1), "10m", "web,sidecar", "nginx:1.27,busybox", "app=x,name=update-demo"},
		},
		{
			"replication controller without template",
			schema.GroupResource{Resource: "replicationcontrollers"},
			&corev1.ReplicationController{ObjectMeta: objMeta("bare")},
			[]interface{}{"bare", int64(1), int64(0), int64(0), "10m", "", "", "<none>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustFor(t, tt.gr)
			if got := cells(t, p, tt.obj); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("cells = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestIngressRows(t *testing.T) {
	rules := func(hosts ...string) []networkingv1.IngressRule {
		out := make([]networkingv1.IngressRule, len(hosts))
		for i, h := range hosts {
			out[i] = networkingv1.IngressRule{Host: h}
		}
		return out
	}
	tests := []struct {
		name string
		gr   schema.GroupResource
		obj  runtime.Object
		want []interface{}
	}{
		{
			"ingress without class or hosts",
			schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"},
			&networkingv1.Ingress{ObjectMeta: objMeta("ing"), Spec: networkingv1.IngressSpec{Rules: rules("")}},
			[]interface{}{"ing", "<none>", "*", "", "80", "10m"},
		},
		{
			"ingress with hosts, TLS and address",
			schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"},
			&networkingv1.Ingress{
				ObjectMeta: objMeta("ing"),
				Spec: networkingv1.IngressSpec{
					IngressClassName: ptr("nginx"),
					Rules:            rules("a.example.com", "b.example.com"),
					TLS:              []networkingv1.IngressTLS{{Hosts: []string{"a.example.com"}}},
				},
				Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{
					{IP: "192.0.2.2"}, {IP: "192.0.2.1"}, {Hostname: "lb.example.com"},
				}}},
			},
			[]interface{}{"ing", "nginx", "a.example.com,b.example.com", "192.0.2.1,192.0.2.2,lb.example.com", "80, 443", "10m"},
		},
		{
			"ingress with more hosts",
			schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"},
			&networkingv1.Ingress{ObjectMeta: objMeta("ing"), Spec: networkingv1.IngressSpec{Rules: rules("a", "", "b", "c", "d", "e")}},
			[]interface{}{"ing", "<none>", "a,b,c + 3 more...", "", "80", "10m"},
		},
		{
			"ingress class with parameters",
			schema.GroupResource{Group: "networking.k8s.io", Resource: "ingressclasses"},
			&networkingv1.IngressClass{ObjectMeta: objMeta("nginx"), Spec: networkingv1.IngressClassSpec{
				Controller: "k8s.io/ingress-nginx",
				Parameters: &networkingv1.IngressClassParametersReference{APIGroup: ptr("k8s.example.com"), Kind: "IngressParameters", Name: "external-lb"},
			}},
			[]interface{}{"nginx", "k8s.io/ingress-nginx", "IngressParameters.k8s.example.com/external-lb", "10m"},
		},
		{
			"ingress class with core parameters",
			schema.GroupResource{Group: "networking.k8s.io", Resource: "ingressclasses"},
			&networkingv1.IngressClass{ObjectMeta: objMeta("c"), Spec: networkingv1.IngressClassSpec{
				Controller: "example.com/ctrl",
				Parameters: &networkingv1.IngressClassParametersReference{Kind: "ConfigMap", Name: "cfg"},
			}},
			[]interface{}{"c", "example.com/ctrl", "ConfigMap/cfg", "10m"},
		},
		{
			"ingress class without parameters",
			schema.GroupResource{Group: "networking.k8s.io", Resource: "ingressclasses"},
			&networkingv1.IngressClass{ObjectMeta: objMeta("plain"), Spec: networkingv1.IngressClassSpec{Controller: "example.com/ctrl"}},
			[]interface{}{"plain", "example.com/ctrl", "<none>", "10m"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustFor(t, tt.gr)
			if got := cells(t, p, tt.obj); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("cells = %#v, want %#v", got, tt.want)
			}
		})
	}
}

// zeroObjects maps every supported resource to zero-valued objects of its kind.
func zeroObjects() map[schema.GroupResource][]runtime.Object {
	return map[schema.GroupResource][]runtime.Object{
		{Resource: "pods"}:                                       {&corev1.Pod{}, (*corev1.Pod)(nil)},
		{Resource: "nodes"}:                                      {&corev1.Node{}},
		{Resource: "namespaces"}:                                 {&corev1.Namespace{}},
		{Resource: "services"}:                                   {&corev1.Service{}},
		{Resource: "endpoints"}:                                  {&corev1.Endpoints{}},
		{Resource: "configmaps"}:                                 {&corev1.ConfigMap{}},
		{Resource: "secrets"}:                                    {&corev1.Secret{}},
		{Resource: "serviceaccounts"}:                            {&corev1.ServiceAccount{}},
		{Resource: "events"}:                                     {&corev1.Event{}, (*corev1.Event)(nil)},
		{Group: "events.k8s.io", Resource: "events"}:             {&eventsv1.Event{}, (*eventsv1.Event)(nil)},
		{Group: "apps", Resource: "deployments"}:                 {&appsv1.Deployment{}},
		{Group: "apps", Resource: "replicasets"}:                 {&appsv1.ReplicaSet{}},
		{Group: "apps", Resource: "daemonsets"}:                  {&appsv1.DaemonSet{}},
		{Group: "apps", Resource: "statefulsets"}:                {&appsv1.StatefulSet{}},
		{Group: "apps", Resource: "controllerrevisions"}:         {&appsv1.ControllerRevision{}},
		{Resource: "replicationcontrollers"}:                     {&corev1.ReplicationController{}},
		{Group: "discovery.k8s.io", Resource: "endpointslices"}:  {&discoveryv1.EndpointSlice{}},
		{Group: "networking.k8s.io", Resource: "ingresses"}:      {&networkingv1.Ingress{}},
		{Group: "networking.k8s.io", Resource: "ingressclasses"}: {&networkingv1.IngressClass{}},
		{Group: "coordination.k8s.io", Resource: "leases"}:       {&coordinationv1.Lease{}},
	}
}

func TestZeroValuedObjects(t *testing.T) {
	for gr, objs := range zeroObjects() {
		p := mustFor(t, gr)
		for _, obj := range objs {
			t.Run(gr.String()+"/"+reflect.TypeOf(obj).Elem().Name(), func(t *testing.T) {
				cells(t, p, obj)
				if p.Conditions != nil {
					p.Conditions(obj)
				}
				table, err := Table(p, []runtime.Object{obj}, now)
				if err != nil {
					t.Fatal(err)
				}
				if len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(table.ColumnDefinitions) {
					t.Fatalf("table = %+v", table)
				}
			})
		}
	}
	d := Default()
	if got := cells(t, d, &corev1.Pod{}); !reflect.DeepEqual(got, []interface{}{"", "<unknown>"}) {
		t.Errorf("default zero cells = %#v", got)
	}
}

func TestWrongKind(t *testing.T) {
	for gr := range zeroObjects() {
		p := mustFor(t, gr)
		if _, err := p.Row(&corev1.Binding{}, now); err == nil {
			t.Errorf("%v: Row(*Binding) succeeded, want error", gr)
		}
	}
}

func TestUnstructuredObjects(t *testing.T) {
	toUnstructured := func(obj runtime.Object, apiVersion, kind string) *unstructured.Unstructured {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		return u
	}

	svc := &corev1.Service{ObjectMeta: objMeta("web"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.0.0.1", Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: "TCP"}}}}
	p := mustFor(t, schema.GroupResource{Resource: "services"})
	typed := cells(t, p, svc)
	if got := cells(t, p, toUnstructured(svc, "v1", "Service")); !reflect.DeepEqual(got, typed) {
		t.Errorf("unstructured service cells = %#v, want %#v", got, typed)
	}

	ev := &eventsv1.Event{ObjectMeta: objMeta("e"), Note: "note", Regarding: corev1.ObjectReference{Kind: "Pod", Name: "p"}, EventTime: metav1.NewMicroTime(now.Add(-time.Minute))}
	p = mustFor(t, schema.GroupResource{Group: "events.k8s.io", Resource: "events"})
	typed = cells(t, p, ev)
	if got := cells(t, p, toUnstructured(ev, "events.k8s.io/v1", "Event")); !reflect.DeepEqual(got, typed) {
		t.Errorf("unstructured event cells = %#v, want %#v", got, typed)
	}
	if typed[6] != "note" || typed[3] != "pod/p" {
		t.Errorf("events.k8s.io cells = %#v", typed)
	}
}

func TestTable(t *testing.T) {
	p := mustFor(t, schema.GroupResource{Resource: "configmaps"})
	table, err := Table(p, []runtime.Object{
		&corev1.ConfigMap{ObjectMeta: objMeta("a")},
		&corev1.ConfigMap{ObjectMeta: objMeta("b"), Data: map[string]string{"k": "v"}},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	if table.APIVersion != "meta.k8s.io/v1" || table.Kind != "Table" {
		t.Errorf("type meta = %+v", table.TypeMeta)
	}
	if !reflect.DeepEqual(table.ColumnDefinitions, p.Columns) {
		t.Errorf("columns = %+v", table.ColumnDefinitions)
	}
	if len(table.Rows) != 2 || table.Rows[1].Cells[0] != "b" || table.Rows[1].Cells[1] != int64(1) {
		t.Errorf("rows = %+v", table.Rows)
	}
	for _, r := range table.Rows {
		if r.Object.Object != nil || r.Object.Raw != nil || r.Conditions != nil {
			t.Errorf("row carries object or conditions: %+v", r)
		}
	}

	empty, err := Table(p, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if empty.Rows == nil || len(empty.Rows) != 0 {
		t.Errorf("empty table rows = %#v, want empty non-nil", empty.Rows)
	}

	bad := Printer{Columns: p.Columns, Row: func(runtime.Object, time.Time) ([]interface{}, error) { return []interface{}{"x"}, nil }}
	if _, err := Table(bad, []runtime.Object{&corev1.ConfigMap{}}, now); err == nil {
		t.Error("Table with a short row succeeded, want error")
	}
	if _, err := Table(p, []runtime.Object{&corev1.Pod{}}, now); err == nil {
		t.Error("Table with a wrong kind succeeded, want error")
	}
	if _, err := Table(Printer{}, nil, now); err == nil {
		t.Error("Table without Row succeeded, want error")
	}
}

func TestDefault(t *testing.T) {
	p := Default()
	if got := columnNames(p); got != "NAME AGE" {
		t.Errorf("columns = %q", got)
	}
	if p.Columns[0].Format != "name" {
		t.Errorf("name column format = %q", p.Columns[0].Format)
	}
	obj := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", CreationTimestamp: ago(49 * time.Hour)}}
	if got := cells(t, p, obj); !reflect.DeepEqual(got, []interface{}{"db", "2d1h"}) {
		t.Errorf("cells = %#v", got)
	}
	u := &unstructured.Unstructured{}
	u.SetName("widget")
	u.SetCreationTimestamp(ago(90 * time.Second))
	if got := cells(t, p, u); !reflect.DeepEqual(got, []interface{}{"widget", "90s"}) {
		t.Errorf("unstructured cells = %#v", got)
	}
	if _, err := p.Row(&metav1.Status{}, now); err == nil {
		t.Error("Row(*Status) succeeded, want error")
	}
}

func TestTranslateTimestampSince(t *testing.T) {
	tests := []struct {
		ts   metav1.Time
		want string
	}{
		{metav1.Time{}, "<unknown>"},
		{ago(0), "0s"},
		{ago(45 * time.Second), "45s"},
		{ago(5 * time.Minute), "5m"},
		{ago(3*time.Hour + 20*time.Minute), "3h20m"},
		{ago(8 * 24 * time.Hour), "8d"},
		{ago(-time.Hour), "<invalid>"},
	}
	for _, tt := range tests {
		if got := translateTimestampSince(tt.ts, now); got != tt.want {
			t.Errorf("translateTimestampSince(%v) = %q, want %q", tt.ts, got, tt.want)
		}
	}
	if got := translateMicroTimestampSince(metav1.MicroTime{}, now); got != "<unknown>" {
		t.Errorf("zero micro time = %q", got)
	}
}

func TestPodTemplatePrinter(t *testing.T) {
	p, ok := For(schema.GroupResource{Resource: "podtemplates"})
	if !ok {
		t.Fatal("no printer for podtemplates")
	}
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}, Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "img:1"}, {Name: "b", Image: "img:2"}}},
	}}
	cells, err := p.Row(pt, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := []interface{}{"t", "a,b", "img:1,img:2", "app=web"}
	if fmt.Sprint(cells) != fmt.Sprint(want) || len(p.Columns) != len(want) || p.Columns[3].Name != "Pod Labels" {
		t.Errorf("cells %v columns %v, want %v", cells, p.Columns, want)
	}
}
