package audit_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/apiserver/audit"
	"github.com/kubette/kubette/internal/controlplane"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// TestAuditLogThroughClientGo runs the API server with a policy that logs secrets and
// pods at Metadata and configmaps at RequestResponse, writes and reads a secret and a
// configmap through client-go, creates a pod where PodSecurity enforces baseline, and
// checks the lines of the log.
func TestAuditLogThroughClientGo(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: ["secrets"]
- level: Metadata
  resources:
  - group: ""
    resources: ["pods"]
- level: RequestResponse
  omitManagedFields: true
  resources:
  - group: ""
    resources: ["configmaps"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "audit.log")
	env := testenv.Start(t, testenv.Options{Audit: controlplane.AuditConfig{PolicyFile: policy, LogConfig: audit.LogConfig{Path: logPath}}})
	ctx := context.Background()
	const password = "hunter2-not-for-the-log"
	if _, err := env.Client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1"},
		StringData: map[string]string{"password": password}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().Secrets("default").Get(ctx, "s1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	cm, err := env.Client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c1"},
		Data: map[string]string{"k": "visible-value"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().ConfigMaps("default").Get(ctx, "c1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().ConfigMaps("default").Get(ctx, "missing", metav1.GetOptions{}); err == nil {
		t.Fatal("got a configmap that does not exist")
	}

	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "psa",
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().Pods("psa").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A watch is long-running: it is logged when its response starts and when it ends.
	w, err := env.Client.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()

	find := func(events []audit.Event, verb, resource, name string) *audit.Event {
		for i, ev := range events {
			if ev.Verb == verb && ev.ObjectRef != nil && ev.ObjectRef.Resource == resource && ev.ObjectRef.Name == name {
				return &events[i]
			}
		}
		return nil
	}
	var events []audit.Event
	var raw []byte
	poll.Until(t, "the audit log has the requests", func() error {
		raw, events = readLog(t, logPath)
		if find(events, "get", "configmaps", "missing") == nil || find(events, "create", "pods", "p1") == nil ||
			len(stagesOf(events, "watch")) < 2 {
			return fmt.Errorf("%d events so far", len(events))
		}
		return nil
	})
	for _, leak := range []string{password, "aHVudGVyMi1ub3QtZm9yLXRoZS1sb2c="} {
		if bytes.Contains(raw, []byte(leak)) {
			t.Errorf("the log holds the secret's data %q", leak)
		}
	}
	if got := strings.Join(stagesOf(events, "watch"), ","); got != "ResponseStarted,ResponseComplete" {
		t.Errorf("watch stages %s", got)
	}
	for _, ev := range events {
		if (ev.Stage != audit.StageResponseComplete && ev.Verb != "watch") || ev.APIVersion != "audit.k8s.io/v1" || ev.Kind != "Event" || ev.AuditID == "" {
			t.Errorf("event %+v: want audit.k8s.io/v1 Events at ResponseComplete only", ev)
		}
		if ev.ObjectRef == nil || (ev.ObjectRef.Resource != "secrets" && ev.ObjectRef.Resource != "configmaps" && ev.ObjectRef.Resource != "pods") {
			t.Errorf("event of a request the policy does not select: %s %s", ev.Verb, ev.RequestURI)
		}
	}

	for _, c := range []struct {
		verb, resource, name string
		code                 int32
		level                audit.Level
	}{
		{"create", "secrets", "s1", 201, audit.LevelMetadata},
		{"get", "secrets", "s1", 200, audit.LevelMetadata},
		{"create", "configmaps", "c1", 201, audit.LevelRequestResponse},
		{"get", "configmaps", "c1", 200, audit.LevelRequestResponse},
		{"get", "configmaps", "missing", 404, audit.LevelRequestResponse},
	} {
		ev := find(events, c.verb, c.resource, c.name)
		if ev == nil {
			t.Errorf("no event for %s %s %s", c.verb, c.resource, c.name)
			continue
		}
		what := c.verb + " " + c.resource + "/" + c.name
		if ev.Level != c.level || ev.ResponseStatus == nil || ev.ResponseStatus.Code != c.code {
			t.Errorf("%s: level %s, status %+v; want %s, %d", what, ev.Level, ev.ResponseStatus, c.level, c.code)
		}
		if ev.User.Username != "kubernetes-admin" || !contains(ev.User.Groups, "system:masters") || len(ev.SourceIPs) == 0 ||
			!strings.HasPrefix(ev.UserAgent, "audit.test") || ev.ObjectRef.Namespace != "default" || ev.ObjectRef.APIVersion != "v1" {
			t.Errorf("%s: event %+v", what, ev)
		}
		if ev.Annotations[`authorization.k8s.io/decision`] != "allow" {
			t.Errorf("%s: annotations %v", what, ev.Annotations)
		}
		if c.level == audit.LevelMetadata && (ev.RequestObject != nil || ev.ResponseObject != nil) {
			t.Errorf("%s: bodies at Metadata", what)
		}
		if ev.StageTimestamp.Before(&ev.RequestReceivedTimestamp) {
			t.Errorf("%s: stage before receipt", what)
		}
	}
	if ev := find(events, "create", "configmaps", "c1"); ev != nil {
		var req, resp corev1.ConfigMap
		if err := json.Unmarshal(ev.RequestObject, &req); err != nil || req.Data["k"] != "visible-value" {
			t.Errorf("create configmap requestObject %s: %v", ev.RequestObject, err)
		}
		if err := json.Unmarshal(ev.ResponseObject, &resp); err != nil || resp.UID != cm.UID || len(resp.ManagedFields) != 0 {
			t.Errorf("create configmap responseObject %s: %v (want uid %s, no managedFields)", ev.ResponseObject, err, cm.UID)
		}
	}
	if ev := find(events, "create", "pods", "p1"); ev != nil && (ev.Annotations["pod-security.kubernetes.io/enforce-policy"] != "baseline:latest" ||
		ev.ObjectRef.Namespace != "psa" || ev.ResponseStatus.Code != 201) {
		t.Errorf("pod create event: annotations %v, %+v, status %+v", ev.Annotations, ev.ObjectRef, ev.ResponseStatus)
	}
	if ev := find(events, "get", "configmaps", "missing"); ev != nil && (ev.ResponseStatus.Reason != metav1.StatusReasonNotFound ||
		!strings.Contains(ev.ResponseStatus.Message, `"missing" not found`)) {
		t.Errorf("404 status %+v", ev.ResponseStatus)
	}
}

func readLog(t *testing.T, path string) ([]byte, []audit.Event) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the audit log: %v", err)
	}
	var events []audit.Event
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var ev audit.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		events = append(events, ev)
	}
	return raw, events
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func stagesOf(events []audit.Event, verb string) []string {
	var s []string
	for _, ev := range events {
		if ev.Verb == verb {
			s = append(s, string(ev.Stage))
		}
	}
	return s
}
