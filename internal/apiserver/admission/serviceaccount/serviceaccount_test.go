package serviceaccount

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

// reader is a Reader over a map of ServiceAccounts that counts lookups.
type reader struct {
	sas   map[string]*corev1.ServiceAccount
	calls int
}

func (r *reader) Get(_ context.Context, gr schema.GroupResource, ns, name string) (runtime.Object, error) {
	r.calls++
	if sa, ok := r.sas[ns+"/"+name]; ok && gr.Resource == "serviceaccounts" {
		return sa.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(gr, name)
}

func newPlugin(sas ...*corev1.ServiceAccount) (*Plugin, *reader) {
	r := &reader{sas: map[string]*corev1.ServiceAccount{}}
	for _, sa := range sas {
		r.sas[sa.Namespace+"/"+sa.Name] = sa
	}
	p := New(r)
	p.generateName = func() string { return "kube-api-access-abcde" }
	p.retryInterval = time.Microsecond
	return p, r
}

func sa(name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
}

func create(pod *corev1.Pod) *admission.Attributes {
	return &admission.Attributes{Resource: corev1.SchemeGroupVersion.WithResource("pods"), Kind: corev1.SchemeGroupVersion.WithKind("Pod"),
		Namespace: "ns", Name: pod.Name, Operation: admission.Create, Object: pod}
}

func pod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init"}},
		Containers:     []corev1.Container{{Name: "a"}, {Name: "b", VolumeMounts: []corev1.VolumeMount{{Name: "mine", MountPath: MountPath}}}},
	}}
}

// upstreamVolume is the volume upstream's plugin injects, as a v1 pod shows it.
const upstreamVolume = `
name: kube-api-access-abcde
projected:
  defaultMode: 420
  sources:
  - serviceAccountToken:
      expirationSeconds: 3607
      path: token
  - configMap:
      items:
      - key: ca.crt
        path: ca.crt
      name: kube-root-ca.crt
  - downwardAPI:
      items:
      - fieldRef:
          apiVersion: v1
          fieldPath: metadata.namespace
        path: namespace
`

func TestInjectsTokenVolume(t *testing.T) {
	p, _ := newPlugin(sa("default"))
	pd := pod()
	if err := p.Admit(context.Background(), create(pd)); err != nil {
		t.Fatal(err)
	}
	if pd.Spec.ServiceAccountName != "default" {
		t.Errorf("service account %q", pd.Spec.ServiceAccountName)
	}
	var want corev1.Volume
	if err := yaml.Unmarshal([]byte(upstreamVolume), &want); err != nil {
		t.Fatal(err)
	}
	if len(pd.Spec.Volumes) != 1 {
		t.Fatalf("volumes %+v", pd.Spec.Volumes)
	}
	if d := cmp.Diff(want, pd.Spec.Volumes[0]); d != "" {
		t.Errorf("volume (-upstream +got):\n%s", d)
	}
	mount := corev1.VolumeMount{Name: "kube-api-access-abcde", ReadOnly: true, MountPath: MountPath}
	if got := pd.Spec.InitContainers[0].VolumeMounts; len(got) != 1 || !cmp.Equal(got[0], mount) {
		t.Errorf("init container mounts %+v", got)
	}
	if got := pd.Spec.Containers[0].VolumeMounts; len(got) != 1 || !cmp.Equal(got[0], mount) {
		t.Errorf("container mounts %+v", got)
	}
	// A container mounting something of its own at the path keeps it.
	if got := pd.Spec.Containers[1].VolumeMounts; len(got) != 1 || got[0].Name != "mine" {
		t.Errorf("container b mounts %+v", got)
	}
}

func TestKeepsExistingTokenVolume(t *testing.T) {
	p, _ := newPlugin(sa("default"))
	pd := pod()
	pd.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access-xyz12", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	if err := p.Admit(context.Background(), create(pd)); err != nil {
		t.Fatal(err)
	}
	if len(pd.Spec.Volumes) != 1 || pd.Spec.Containers[0].VolumeMounts[0].Name != "kube-api-access-xyz12" {
		t.Errorf("volumes %+v, mounts %+v", pd.Spec.Volumes, pd.Spec.Containers[0].VolumeMounts)
	}
}

func TestOptOut(t *testing.T) {
	no, yes := false, true
	optedOut := sa("quiet")
	optedOut.AutomountServiceAccountToken = &no
	p, _ := newPlugin(optedOut, sa("default"))

	pd := pod()
	pd.Spec.ServiceAccountName = "quiet"
	if err := p.Admit(context.Background(), create(pd)); err != nil {
		t.Fatal(err)
	}
	if len(pd.Spec.Volumes) != 0 || len(pd.Spec.Containers[0].VolumeMounts) != 0 {
		t.Errorf("service account opted out, pod got %+v", pd.Spec.Volumes)
	}

	pd = pod()
	pd.Spec.ServiceAccountName = "quiet"
	pd.Spec.AutomountServiceAccountToken = &yes
	if err := p.Admit(context.Background(), create(pd)); err != nil {
		t.Fatal(err)
	}
	if len(pd.Spec.Volumes) != 1 {
		t.Errorf("pod opted in over its service account, got %+v", pd.Spec.Volumes)
	}

	pd = pod()
	pd.Spec.AutomountServiceAccountToken = &no
	if err := p.Admit(context.Background(), create(pd)); err != nil {
		t.Fatal(err)
	}
	if len(pd.Spec.Volumes) != 0 {
		t.Errorf("pod opted out, got %+v", pd.Spec.Volumes)
	}
}

func TestMissingServiceAccount(t *testing.T) {
	p, r := newPlugin()
	pd := pod()
	pd.Spec.ServiceAccountName = "ghost"
	err := p.Admit(context.Background(), create(pd))
	if want := `pods "p" is forbidden: error looking up service account ns/ghost: serviceaccount "ghost" not found`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	if r.calls != 1 {
		t.Errorf("a missing named service account was looked up %d times", r.calls)
	}
	r.calls = 0
	err = p.Admit(context.Background(), create(pod()))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `error looking up service account ns/default: serviceaccount "default" not found`) {
		t.Errorf("missing default: %v", err)
	}
	if r.calls != 10 {
		t.Errorf("a missing default service account was looked up %d times, want 10 as upstream", r.calls)
	}
}

func TestImagePullSecrets(t *testing.T) {
	s := sa("default")
	s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "reg"}}
	p, _ := newPlugin(s)
	pd := pod()
	if err := p.Admit(context.Background(), create(pd)); err != nil {
		t.Fatal(err)
	}
	if len(pd.Spec.ImagePullSecrets) != 1 || pd.Spec.ImagePullSecrets[0].Name != "reg" {
		t.Errorf("pull secrets %+v", pd.Spec.ImagePullSecrets)
	}
	pd = pod()
	pd.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "own"}}
	if err := p.Admit(context.Background(), create(pd)); err != nil {
		t.Fatal(err)
	}
	if len(pd.Spec.ImagePullSecrets) != 1 || pd.Spec.ImagePullSecrets[0].Name != "own" {
		t.Errorf("pull secrets %+v", pd.Spec.ImagePullSecrets)
	}
}

func TestEnforceMountableSecrets(t *testing.T) {
	s := sa("strict")
	s.Annotations = map[string]string{EnforceMountableSecretsAnnotation: "true"}
	s.Secrets = []corev1.ObjectReference{{Name: "ok"}}
	p, _ := newPlugin(s)
	mk := func(secret string) *corev1.Pod {
		pd := pod()
		pd.Spec.ServiceAccountName = "strict"
		pd.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "k"}}}}
		return pd
	}
	if err := p.Admit(context.Background(), create(mk("ok"))); err != nil {
		t.Errorf("listed secret: %v", err)
	}
	err := p.Admit(context.Background(), create(mk("other")))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `container a with envVar X referencing secret.secretName="other" is not allowed because service account strict does not reference that secret`) {
		t.Errorf("unlisted secret: %v", err)
	}
	// Ephemeral containers added later are checked too.
	pd := mk("ok")
	pd.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug",
		EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "other"}}}}}}}
	a := create(pd)
	a.Operation, a.Subresource = admission.Update, "ephemeralcontainers"
	if err := p.Validate(context.Background(), a); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ephemeral container debug with envFrom") {
		t.Errorf("ephemeral container: %v", err)
	}
}

func TestMirrorPods(t *testing.T) {
	p, _ := newPlugin(sa("default"))
	mirror := func() *corev1.Pod {
		pd := pod()
		pd.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
		return pd
	}
	pd := mirror()
	if err := p.Admit(context.Background(), create(pd)); err != nil || pd.Spec.ServiceAccountName != "" || len(pd.Spec.Volumes) != 0 {
		t.Errorf("plain mirror pod: %v, %+v", err, pd.Spec)
	}
	pd = mirror()
	pd.Spec.ServiceAccountName = "default"
	if err := p.Admit(context.Background(), create(pd)); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "a mirror pod may not reference service accounts") {
		t.Errorf("mirror pod with a service account: %v", err)
	}
	pd = mirror()
	pd.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "x"}}}}
	if err := p.Admit(context.Background(), create(pd)); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "a mirror pod may not reference secrets") {
		t.Errorf("mirror pod with a secret: %v", err)
	}
}

func TestIgnoresOtherWrites(t *testing.T) {
	p, r := newPlugin()
	pd := pod()
	upd := create(pd)
	upd.Operation = admission.Update
	if err := p.Admit(context.Background(), upd); err != nil || pd.Spec.ServiceAccountName != "" {
		t.Errorf("update: %v", err)
	}
	if err := p.Validate(context.Background(), upd); err != nil {
		t.Errorf("update: %v", err)
	}
	st := create(pd)
	st.Subresource = "status"
	if err := p.Admit(context.Background(), st); err != nil {
		t.Errorf("status: %v", err)
	}
	cm := &admission.Attributes{Resource: corev1.SchemeGroupVersion.WithResource("configmaps"), Operation: admission.Create, Object: &corev1.ConfigMap{}}
	if err := p.Admit(context.Background(), cm); err != nil {
		t.Errorf("configmap: %v", err)
	}
	if r.calls != 0 {
		t.Errorf("%d lookups for writes the plugin ignores", r.calls)
	}
}

func TestGeneratedVolumeName(t *testing.T) {
	name := New(&reader{}).generateName()
	if !strings.HasPrefix(name, VolumeNamePrefix) || len(name) != len(VolumeNamePrefix)+5 {
		t.Errorf("name %q", name)
	}
}
