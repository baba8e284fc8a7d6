package node

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
	"github.com/kubette/kubette/internal/rbacpolicy"
)

// fakeCluster holds objects by resource, namespace and name.
type fakeCluster map[schema.GroupResource][]runtime.Object

func (f fakeCluster) Get(_ context.Context, gr schema.GroupResource, ns, name string) (runtime.Object, error) {
	for _, o := range f[gr] {
		m := o.(metav1.Object)
		if m.GetNamespace() == ns && m.GetName() == name {
			return o, nil
		}
	}
	return nil, apierrors.NewNotFound(gr, name)
}

func (f fakeCluster) List(_ context.Context, gr schema.GroupResource, ns string) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, o := range f[gr] {
		if ns == "" || o.(metav1.Object).GetNamespace() == ns {
			out = append(out, o)
		}
	}
	return out, nil
}

func TestNodeAuthorizer(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.PodSpec{
		NodeName: "n1", ServiceAccountName: "web-sa",
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
		Volumes: []corev1.Volume{
			{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "vol-secret"}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-cm"}}}}}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}},
		},
		Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env-secret"}, Key: "k"}}}}}},
	}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}, Spec: corev1.PodSpec{
		NodeName: "n2", Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-secret"}}}}}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: "claim"}}}
	z := New(fakeCluster{podsGR: {pod, other}, pvsGR: {pv}}, rbacpolicy.NodeRules())

	n1 := &filters.User{Name: "system:node:n1", Groups: []string{NodesGroup, "system:authenticated"}}
	res := func(verb, group, resource, sub, ns, name string) authorizer.Attributes {
		return authorizer.Attributes{User: n1, Verb: verb, ResourceRequest: true, APIGroup: group, APIVersion: "v1",
			Resource: resource, Subresource: sub, Namespace: ns, Name: name}
	}
	list := func(resource, ns, sel string) authorizer.Attributes {
		a := res("list", "", resource, "", ns, "")
		a.FieldSelector = sel
		return a
	}
	cases := []struct {
		name string
		a    authorizer.Attributes
		want authorizer.Decision
	}{
		{"volume secret", res("get", "", "secrets", "", "ns", "vol-secret"), authorizer.Allow},
		{"env secret", res("watch", "", "secrets", "", "ns", "env-secret"), authorizer.Allow},
		{"pull secret", res("get", "", "secrets", "", "ns", "pull"), authorizer.Allow},
		{"another node's secret", res("get", "", "secrets", "", "ns", "db-secret"), authorizer.NoOpinion},
		{"secret in another namespace", res("get", "", "secrets", "", "other", "vol-secret"), authorizer.NoOpinion},
		{"list all secrets", res("list", "", "secrets", "", "ns", ""), authorizer.NoOpinion},
		{"update a secret", res("update", "", "secrets", "", "ns", "vol-secret"), authorizer.NoOpinion},
		{"projected config map", res("get", "", "configmaps", "", "ns", "proj-cm"), authorizer.Allow},
		{"unrelated config map", res("get", "", "configmaps", "", "ns", "cm"), authorizer.NoOpinion},
		{"claim", res("get", "", "persistentvolumeclaims", "", "ns", "claim"), authorizer.Allow},
		{"claim status", res("patch", "", "persistentvolumeclaims", "status", "ns", "claim"), authorizer.Allow},
		{"list claims", res("list", "", "persistentvolumeclaims", "", "ns", ""), authorizer.NoOpinion},
		{"bound volume", res("get", "", "persistentvolumes", "", "", "pv1"), authorizer.Allow},
		{"unknown volume", res("get", "", "persistentvolumes", "", "", "pv2"), authorizer.NoOpinion},
		{"token of its pod's service account", res("create", "", "serviceaccounts", "token", "ns", "web-sa"), authorizer.Allow},
		{"token of another service account", res("create", "", "serviceaccounts", "token", "ns", "default"), authorizer.NoOpinion},
		{"get a service account", res("get", "", "serviceaccounts", "", "ns", "web-sa"), authorizer.NoOpinion},
		{"own node", res("get", "", "nodes", "", "", "n1"), authorizer.Allow},
		{"another node", res("get", "", "nodes", "", "", "n2"), authorizer.NoOpinion},
		{"all nodes", res("list", "", "nodes", "", "", ""), authorizer.NoOpinion},
		{"node status", res("patch", "", "nodes", "status", "", "n1"), authorizer.Allow},
		{"delete a node", res("delete", "", "nodes", "", "", "n1"), authorizer.NoOpinion},
		{"own lease", res("update", "coordination.k8s.io", "leases", "", "kube-node-lease", "n1"), authorizer.Allow},
		{"another lease", res("update", "coordination.k8s.io", "leases", "", "kube-node-lease", "n2"), authorizer.NoOpinion},
		{"lease elsewhere", res("get", "coordination.k8s.io", "leases", "", "kube-system", "n1"), authorizer.NoOpinion},
		{"its pods", list("pods", "", "spec.nodeName=n1"), authorizer.Allow},
		{"another node's pods", list("pods", "", "spec.nodeName=n2"), authorizer.NoOpinion},
		{"all pods", list("pods", "", ""), authorizer.NoOpinion},
		{"its pod", res("get", "", "pods", "", "ns", "web"), authorizer.Allow},
		{"another node's pod", res("get", "", "pods", "", "ns", "db"), authorizer.NoOpinion},
		{"pod status", res("patch", "", "pods", "status", "ns", "web"), authorizer.Allow},
		{"mirror pod", res("create", "", "pods", "", "ns", ""), authorizer.Allow},
		{"exec", res("create", "", "pods", "exec", "ns", "web"), authorizer.NoOpinion},
		{"services (system:node's rules)", res("watch", "", "services", "", "", ""), authorizer.Allow},
		{"events (system:node's rules)", res("create", "", "events", "", "ns", ""), authorizer.Allow},
		{"deployments", res("list", "apps", "deployments", "", "", ""), authorizer.NoOpinion},
	}
	for _, c := range cases {
		got, reason, err := z.Authorize(context.Background(), c.a)
		if err != nil || got != c.want {
			t.Errorf("%s: %v (%q, %v), want %v", c.name, got, reason, err, c.want)
		}
	}

	// Not a node: no opinion; in system:nodes without a node name: no opinion with a reason.
	if d, _, _ := z.Authorize(context.Background(), authorizer.Attributes{User: &filters.User{Name: "system:node:n1"},
		Verb: "get", ResourceRequest: true, Resource: "secrets", Namespace: "ns", Name: "vol-secret"}); d != authorizer.NoOpinion {
		t.Errorf("a user named like a node but not in system:nodes: %v", d)
	}
	if d, reason, _ := z.Authorize(context.Background(), authorizer.Attributes{User: &filters.User{Name: "bob", Groups: []string{NodesGroup}},
		Verb: "get", ResourceRequest: true, Resource: "services"}); d != authorizer.NoOpinion || reason == "" {
		t.Errorf("a node without a node name: %v %q", d, reason)
	}
}
