package controlplane_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/controlplane"
)

// warnings records the Warning headers client-go receives.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// TestPodSecurity drives the PodSecurity admission plugin through the API: the
// namespace labels choose the standard, enforce refuses in upstream's words, warn and a
// stricter enforce label on a namespace with running pods warn, bad labels are refused.
func TestPodSecurity(t *testing.T) {
	ctx := context.Background()
	// No ServiceAccount controller runs here to make the default ServiceAccount.
	cfg := startServerConfig(t, controlplane.Config{DisableAdmissionPlugins: []string{"ServiceAccount"}})
	rec := &warnings{}
	cfg.WarningHandler = rec
	c := kubernetes.NewForConfigOrDie(cfg)

	mkns := func(name string, labels map[string]string) error {
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		return err
	}
	if err := mkns("strict", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}); err != nil {
		t.Fatal(err)
	}
	if err := mkns("warned", map[string]string{"pod-security.kubernetes.io/warn": "baseline"}); err != nil {
		t.Fatal(err)
	}
	err := mkns("bad", map[string]string{"pod-security.kubernetes.io/enforce": "strictest"})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "pod-security.kubernetes.io/enforce") {
		t.Fatalf("bad label: %v", err)
	}
	privileged := func(ns string) *corev1.Pod {
		yes := true
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "priv", Namespace: ns}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: &yes}}}}}
	}
	_, err = c.CoreV1().Pods("strict").Create(ctx, privileged("strict"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) ||
		!strings.Contains(err.Error(), `privileged (container "c" must not set securityContext.privileged=true)`) {
		t.Fatalf("privileged pod in restricted namespace: %v", err)
	}
	no, yes, uid := false, true, int64(1000)
	compliant := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ok", Namespace: "strict"}, Spec: corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{Name: "c", Image: "busybox", SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}}}}
	if _, err := c.CoreV1().Pods("strict").Create(ctx, compliant, metav1.CreateOptions{}); err != nil {
		t.Fatalf("restricted pod: %v", err)
	}
	rec.take()
	if _, err := c.CoreV1().Pods("warned").Create(ctx, privileged("warned"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("privileged pod in warned namespace: %v", err)
	}
	if w := rec.take(); len(w) != 1 || !strings.Contains(w[0], `would violate PodSecurity "baseline:latest": privileged`) {
		t.Fatalf("warnings: %q", w)
	}
	// Enforcing baseline on the namespace now warns about the running privileged pod.
	ns, err := c.CoreV1().Namespaces().Get(ctx, "warned", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	if _, err := c.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if w := rec.take(); len(w) == 0 || !strings.Contains(strings.Join(w, "\n"), "priv: privileged") {
		t.Fatalf("warnings of the enforce update: %q", w)
	}
}
