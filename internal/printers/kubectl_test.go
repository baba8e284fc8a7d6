package printers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestKubectlRendersTables serves printer tables from a minimal fake API
// server and checks what the real kubectl prints. It is skipped when kubectl
// is not installed.
func TestKubectlRendersTables(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	if testing.Short() {
		t.Skip("runs kubectl")
	}

	// Ages are computed against the wall clock, as kubectl would see them.
	wall := time.Now()
	created := metav1.NewTime(wall.Add(-10 * time.Minute))
	lists := map[string]struct {
		gr   schema.GroupResource
		objs []runtime.Object
	}{
		"/api/v1/namespaces/default/pods": {schema.GroupResource{Resource: "pods"}, []runtime.Object{
			&corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", CreationTimestamp: created},
				Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app"}}},
				Status: corev1.PodStatus{
					Phase:  corev1.PodRunning,
					PodIPs: []corev1.PodIP{{IP: "10.0.0.9"}},
					ContainerStatuses: []corev1.ContainerStatus{{
						Name: "app", RestartCount: 4,
						State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
						LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.NewTime(wall.Add(-20 * time.Minute))}},
					}},
				},
			},
		}},
		"/api/v1/namespaces/default/services": {schema.GroupResource{Resource: "services"}, []runtime.Object{
			&corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", CreationTimestamp: created},
				Spec: corev1.ServiceSpec{
					Type: corev1.ServiceTypeNodePort, ClusterIPs: []string{"10.96.0.20"},
					Ports:    []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}},
					Selector: map[string]string{"app": "web"},
				},
			},
		}},
		"/api/v1/namespaces/default/events": {schema.GroupResource{Resource: "events"}, []runtime.Object{
			&corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "web.17a", Namespace: "default", CreationTimestamp: created},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web"},
				Reason:         "BackOff",
				Message:        "Back-off restarting failed container",
				Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
				FirstTimestamp: metav1.NewTime(wall.Add(-20 * time.Minute)),
				LastTimestamp:  created,
				Count:          12,
				Type:           corev1.EventTypeWarning,
			},
		}},
		"/apis/apps/v1/namespaces/default/deployments": {schema.GroupResource{Group: "apps", Resource: "deployments"}, []runtime.Object{
			&appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", CreationTimestamp: created},
				Spec: appsv1.DeploymentSpec{
					Replicas: func() *int32 { r := int32(3); return &r }(),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				},
				Status: appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2},
			},
		}},
	}

	writeJSON := func(w http.ResponseWriter, v interface{}) {
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(v); err != nil {
			t.Errorf("encode: %v", err)
		}
	}
	resource := func(name, kind string) metav1.APIResource {
		return metav1.APIResource{Name: name, Namespaced: true, Kind: kind, Verbs: metav1.Verbs{"get", "list"}}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api":
			writeJSON(w, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
			return
		case "/apis":
			gv := metav1.GroupVersionForDiscovery{GroupVersion: "apps/v1", Version: "v1"}
			writeJSON(w, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{
				{Name: "apps", Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv},
			}})
			return
		case "/api/v1":
			writeJSON(w, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "v1",
				APIResources: []metav1.APIResource{resource("pods", "Pod"), resource("services", "Service"), resource("events", "Event")}})
			return
		case "/apis/apps/v1":
			writeJSON(w, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "apps/v1",
				APIResources: []metav1.APIResource{resource("deployments", "Deployment")}})
			return
		}
		list, ok := lists[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if !strings.Contains(r.Header.Get("Accept"), "as=Table") {
			t.Errorf("%s: kubectl did not ask for a Table: %q", r.URL.Path, r.Header.Get("Accept"))
		}
		p, _ := For(list.gr)
		table, err := Table(p, list.objs, time.Now())
		if err != nil {
			t.Errorf("Table: %v", err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for i, obj := range list.objs {
			m := obj.(metav1.Object)
			table.Rows[i].Object = runtime.RawExtension{Object: &metav1.PartialObjectMetadata{
				TypeMeta:   metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
				ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), CreationTimestamp: m.GetCreationTimestamp()},
			}}
		}
		writeJSON(w, table)
	}))
	defer srv.Close()

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "config")
	config := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + srv.URL +
		"\ncontexts:\n- name: c\n  context:\n    cluster: c\n    namespace: default\ncurrent-context: c\nusers: []\n"
	if err := os.WriteFile(kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		args []string
		want string
	}{
		{
			[]string{"get", "pods"},
			"NAME   READY   STATUS             RESTARTS      AGE\n" +
				"web    0/1     CrashLoopBackOff   4 (20m ago)   10m\n",
		},
		{
			[]string{"get", "pods", "-o", "wide"},
			"NAME   READY   STATUS             RESTARTS      AGE   IP         NODE     NOMINATED NODE   READINESS GATES\n" +
				"web    0/1     CrashLoopBackOff   4 (20m ago)   10m   10.0.0.9   node-1   <none>           <none>\n",
		},
		{
			[]string{"get", "services", "-o", "wide"},
			"NAME   TYPE       CLUSTER-IP   EXTERNAL-IP   PORT(S)        AGE   SELECTOR\n" +
				"web    NodePort   10.96.0.20   <none>        80:30080/TCP   10m   app=web\n",
		},
		{
			[]string{"get", "events"},
			"LAST SEEN   TYPE      REASON    OBJECT    MESSAGE\n" +
				"10m         Warning   BackOff   pod/web   Back-off restarting failed container\n",
		},
		{
			[]string{"get", "events", "-o", "wide"},
			"LAST SEEN   TYPE      REASON    OBJECT    SUBOBJECT   SOURCE            MESSAGE                                FIRST SEEN   COUNT   NAME\n" +
				"10m         Warning   BackOff   pod/web               kubelet, node-1   Back-off restarting failed container   20m          12      web.17a\n",
		},
		{
			[]string{"get", "deployments"},
			"NAME   READY   UP-TO-DATE   AVAILABLE   AGE\n" +
				"web    2/3     3            2           10m\n",
		},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			args := append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache")}, tt.args...)
			cmd := exec.Command(kubectl, args...)
			cmd.Env = append(os.Environ(), "HOME="+dir)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("kubectl %v: %v\n%s", tt.args, err, stderr.String())
			}
			if string(out) != tt.want {
				t.Errorf("kubectl %v printed\n%s\nwant\n%s", tt.args, out, tt.want)
			}
		})
	}
}
