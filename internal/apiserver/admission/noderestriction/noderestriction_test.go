package noderestriction

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

type pods map[string]*corev1.Pod

func (p pods) Get(_ context.Context, gr schema.GroupResource, ns, name string) (runtime.Object, error) {
	if pod, ok := p[ns+"/"+name]; ok {
		return pod, nil
	}
	return nil, apierrors.NewNotFound(gr, name)
}

func (p pods) List(context.Context, schema.GroupResource, string) ([]runtime.Object, error) {
	return nil, nil
}

func TestNodeRestriction(t *testing.T) {
	mine := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	theirs := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "theirs"}, Spec: corev1.PodSpec{NodeName: "n2"}}
	p := New(pods{"ns/mine": mine, "ns/theirs": theirs})
	n1 := &filters.User{Name: "system:node:n1", Groups: []string{"system:nodes"}}
	nodeObj := func(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	mirror := func(node string, mod func(*corev1.Pod)) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "static-" + node,
			Annotations: map[string]string{mirrorPodAnnotation: "x"}}, Spec: corev1.PodSpec{NodeName: node}}
		if mod != nil {
			mod(pod)
		}
		return pod
	}
	withStatus := func(pod *corev1.Pod, labels map[string]string) *corev1.Pod {
		c := pod.DeepCopy()
		c.Labels = labels
		c.Status.Phase = corev1.PodRunning
		return c
	}
	res := func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Version: "v1", Resource: r}
	}
	cases := []struct {
		name string
		a    admission.Attributes
		ok   bool
	}{
		{"create own node", admission.Attributes{Resource: res("nodes"), Name: "n1", Operation: admission.Create,
			Object: nodeObj("n1", map[string]string{"kubernetes.io/hostname": "n1", "node.kubernetes.io/x": "y", "example.com/a": "b"})}, true},
		{"create another node", admission.Attributes{Resource: res("nodes"), Name: "n2", Operation: admission.Create, Object: nodeObj("n2", nil)}, false},
		{"create with a node-role label", admission.Attributes{Resource: res("nodes"), Name: "n1", Operation: admission.Create,
			Object: nodeObj("n1", map[string]string{"node-role.kubernetes.io/control-plane": ""})}, false},
		{"create with a node-restriction label", admission.Attributes{Resource: res("nodes"), Name: "n1", Operation: admission.Create,
			Object: nodeObj("n1", map[string]string{"node-restriction.kubernetes.io/a": ""})}, false},
		{"create with taints", admission.Attributes{Resource: res("nodes"), Name: "n1", Operation: admission.Create,
			Object: nodeObj("n1", nil, corev1.Taint{Key: "a", Effect: corev1.TaintEffectNoSchedule})}, true},
		{"change own taints", admission.Attributes{Resource: res("nodes"), Name: "n1", Operation: admission.Update,
			Object: nodeObj("n1", nil), OldObject: nodeObj("n1", nil, corev1.Taint{Key: "a", Effect: corev1.TaintEffectNoSchedule})}, false},
		{"remove a kubernetes.io label", admission.Attributes{Resource: res("nodes"), Name: "n1", Operation: admission.Update,
			Object: nodeObj("n1", nil), OldObject: nodeObj("n1", map[string]string{"kubernetes.io/role": "x"})}, false},
		{"update own status", admission.Attributes{Resource: res("nodes"), Subresource: "status", Name: "n1", Operation: admission.Update,
			Object: nodeObj("n1", map[string]string{"a": "b"}), OldObject: nodeObj("n1", nil)}, true},
		{"update another node's status", admission.Attributes{Resource: res("nodes"), Subresource: "status", Name: "n2", Operation: admission.Update,
			Object: nodeObj("n2", nil), OldObject: nodeObj("n2", nil)}, false},
		{"mirror pod", admission.Attributes{Resource: res("pods"), Namespace: "ns", Name: "static-n1", Operation: admission.Create, Object: mirror("n1", nil)}, true},
		{"mirror pod on another node", admission.Attributes{Resource: res("pods"), Namespace: "ns", Operation: admission.Create, Object: mirror("n2", nil)}, false},
		{"not a mirror pod", admission.Attributes{Resource: res("pods"), Namespace: "ns", Operation: admission.Create,
			Object: mirror("n1", func(p *corev1.Pod) { p.Annotations = nil })}, false},
		{"mirror pod with a secret", admission.Attributes{Resource: res("pods"), Namespace: "ns", Operation: admission.Create,
			Object: mirror("n1", func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}}
			})}, false},
		{"mirror pod with a service account", admission.Attributes{Resource: res("pods"), Namespace: "ns", Operation: admission.Create,
			Object: mirror("n1", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" })}, false},
		{"own pod's status", admission.Attributes{Resource: res("pods"), Subresource: "status", Namespace: "ns", Name: "mine", Operation: admission.Update,
			Object: withStatus(mine, nil), OldObject: mine}, true},
		{"labels through status", admission.Attributes{Resource: res("pods"), Subresource: "status", Namespace: "ns", Name: "mine", Operation: admission.Update,
			Object: withStatus(mine, map[string]string{"a": "b"}), OldObject: mine}, false},
		{"another node's pod's status", admission.Attributes{Resource: res("pods"), Subresource: "status", Namespace: "ns", Name: "theirs", Operation: admission.Update,
			Object: withStatus(theirs, nil), OldObject: theirs}, false},
		{"delete own pod", admission.Attributes{Resource: res("pods"), Namespace: "ns", Name: "mine", Operation: admission.Delete, OldObject: mine}, true},
		{"delete another node's pod", admission.Attributes{Resource: res("pods"), Namespace: "ns", Name: "theirs", Operation: admission.Delete, OldObject: theirs}, false},
		{"update a pod", admission.Attributes{Resource: res("pods"), Namespace: "ns", Name: "mine", Operation: admission.Update, Object: mine, OldObject: mine}, false},
		{"exec", admission.Attributes{Resource: res("pods"), Subresource: "exec", Namespace: "ns", Name: "mine", Operation: admission.Connect}, false},
		{"evict own pod", admission.Attributes{Resource: res("pods"), Subresource: "eviction", Namespace: "ns", Name: "mine", Operation: admission.Create}, true},
		{"evict another node's pod", admission.Attributes{Resource: res("pods"), Subresource: "eviction", Namespace: "ns", Name: "theirs", Operation: admission.Create}, false},
		{"own lease", admission.Attributes{Resource: schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
			Namespace: "kube-node-lease", Name: "n1", Operation: admission.Create}, true},
		{"another lease", admission.Attributes{Resource: schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
			Namespace: "kube-node-lease", Name: "n2", Operation: admission.Create}, false},
		{"a config map (not restricted here)", admission.Attributes{Resource: res("configmaps"), Namespace: "ns", Name: "x", Operation: admission.Create}, true},
	}
	for _, c := range cases {
		a := c.a
		a.User = n1
		err := p.Admit(context.Background(), &a)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want allowed=%v", c.name, err, c.ok)
		}
		if err != nil && !apierrors.IsForbidden(err) && !c.ok {
			t.Errorf("%s: %v is not 403", c.name, err)
		}
	}
	// Other users are not restricted.
	a := admission.Attributes{Resource: res("nodes"), Name: "n2", Operation: admission.Update, User: &filters.User{Name: "admin"},
		Object: nodeObj("n2", nil), OldObject: nodeObj("n2", nil, corev1.Taint{Key: "a"})}
	if err := p.Admit(context.Background(), &a); err != nil {
		t.Errorf("a non-node user: %v", err)
	}
}
