package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// TestSelectableFields checks the fields a selector sees on a pod, on a kind without
// fields of its own, and that each call returns a set of its own.
func TestSelectableFields(t *testing.T) {
	table := NewTable(Builtin())
	pods, _ := table.Lookup(corev1.SchemeGroupVersion, "pods")
	cms, _ := table.Lookup(corev1.SchemeGroupVersion, "configmaps")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "n", SchedulerName: "s"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	got := pods.SelectableFields(pod)
	want := fields.Set{"metadata.name": "p", "metadata.namespace": "ns", "spec.nodeName": "n", "spec.restartPolicy": "",
		"spec.schedulerName": "s", "spec.serviceAccountName": "", "spec.hostNetwork": "false", "status.phase": "Running",
		"status.podIP": "", "status.nominatedNodeName": ""}
	if len(got) != len(want) {
		t.Fatalf("pod fields %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("pod field %s = %q, want %q", k, got[k], v)
		}
	}
	got["spec.nodeName"] = "changed"
	if again := pods.SelectableFields(pod); again["spec.nodeName"] != "n" {
		t.Errorf("a second call shares the first one's set: %v", again)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	if got := cms.SelectableFields(cm); len(got) != 2 || got["metadata.name"] != "c" || got["metadata.namespace"] != "ns" {
		t.Errorf("configmap fields %v", got)
	}
	sel := fields.ParseSelectorOrDie("status.phase!=Succeeded,status.phase!=Failed,spec.schedulerName=s")
	if !sel.Matches(pods.SelectableFields(pod)) {
		t.Error("scheduler's selector does not match the running pod")
	}
}

// TestEventTTLPerStorage checks that resources sharing a storage prefix agree on
// expiring with the event TTL (one write path must not make another's objects
// permanent), and that exactly the Event storage expires.
func TestEventTTLPerStorage(t *testing.T) {
	byPrefix := map[string]bool{}
	for _, r := range Builtin() {
		if r.Virtual {
			continue
		}
		if prev, ok := byPrefix[r.StoragePrefix]; ok && prev != r.ExpiresWithEventTTL {
			t.Errorf("%s %s: ExpiresWithEventTTL %v differs from another resource stored under %s", r.GroupVersion, r.Plural, r.ExpiresWithEventTTL, r.StoragePrefix)
		}
		byPrefix[r.StoragePrefix] = r.ExpiresWithEventTTL
	}
	for prefix, expires := range byPrefix {
		if expires != (prefix == "/registry/events") {
			t.Errorf("%s: ExpiresWithEventTTL %v, want it on the Event storage only", prefix, expires)
		}
	}
}
