// Package serviceaccount is the ServiceAccount admission plugin, as upstream's
// plugin/pkg/admission/serviceaccount: a new pod runs as the ServiceAccount it names
// ("default" when it names none), which must exist (a 403 otherwise); unless the pod or the
// ServiceAccount opts out (automountServiceAccountToken: false), every container and init
// container gets the projected kube-api-access-XXXXX volume (a token from the TokenRequest
// API, the cluster's CA from the kube-root-ca.crt ConfigMap and the namespace) at
// /var/run/secrets/kubernetes.io/serviceaccount; the pod gets the ServiceAccount's image
// pull secrets when it has none; ServiceAccounts annotated
// kubernetes.io/enforce-mountable-secrets limit the secrets their pods may use; mirror pods
// may use no ServiceAccount and no secret.
package serviceaccount

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

// Name is the plugin's name, as upstream's.
const Name = "ServiceAccount"

// Upstream's names.
const (
	// DefaultServiceAccountName is the ServiceAccount of a pod that names none.
	DefaultServiceAccountName = "default"
	// EnforceMountableSecretsAnnotation on a ServiceAccount limits its pods to the secrets
	// it lists.
	EnforceMountableSecretsAnnotation = "kubernetes.io/enforce-mountable-secrets"
	// VolumeNamePrefix starts the name of the injected volume (kube-api-access-XXXXX).
	VolumeNamePrefix = "kube-api-access-"
	// MountPath is where the injected volume is mounted.
	MountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// TokenExpirationSeconds is the lifetime the injected token asks for (the server extends
	// it, see package internal/serviceaccount).
	TokenExpirationSeconds = 60*60 + 7
)

var (
	pods            = schema.GroupResource{Resource: "pods"}
	serviceAccounts = schema.GroupResource{Resource: "serviceaccounts"}
)

// Reader reads the cluster's current objects (the API server's watch caches).
type Reader interface {
	Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error)
}

// Plugin is the ServiceAccount admission plugin.
type Plugin struct {
	read Reader
	// generateName returns the injected volume's name.
	generateName func() string
	// retryInterval is the pause between lookups of a missing default ServiceAccount, which
	// the ServiceAccount controller creates moments after its namespace.
	retryInterval time.Duration
}

var (
	_ admission.Mutator   = (*Plugin)(nil)
	_ admission.Validator = (*Plugin)(nil)
)

// New returns the plugin reading ServiceAccounts through r.
func New(r Reader) *Plugin {
	return &Plugin{read: r, generateName: func() string { return VolumeNamePrefix + utilrand.String(5) }, retryInterval: 150 * time.Millisecond}
}

// handles says whether a is a write of a pod this plugin looks at, and returns the pod.
func handles(a *admission.Attributes) (*corev1.Pod, bool) {
	if a.Resource.GroupResource() != pods || (a.Subresource != "" && a.Subresource != "ephemeralcontainers") {
		return nil, false
	}
	pod, ok := a.Object.(*corev1.Pod)
	return pod, ok
}

// Admit gives a new pod its ServiceAccount, the token volume and the image pull secrets.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	pod, ok := handles(a)
	if !ok || a.Operation != admission.Create || a.Subresource != "" {
		return nil
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return p.Validate(ctx, a)
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = DefaultServiceAccountName
	}
	sa, err := p.serviceAccount(ctx, a.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("error looking up service account %s/%s: %w", a.Namespace, pod.Spec.ServiceAccountName, err))
	}
	if automount(sa, pod) {
		p.mountToken(pod)
	}
	if len(pod.Spec.ImagePullSecrets) == 0 && len(sa.ImagePullSecrets) > 0 {
		pod.Spec.ImagePullSecrets = make([]corev1.LocalObjectReference, len(sa.ImagePullSecrets))
		for i, s := range sa.ImagePullSecrets {
			pod.Spec.ImagePullSecrets[i].Name = s.Name
		}
	}
	return p.Validate(ctx, a)
}

// Validate checks a new pod's ServiceAccount and the secrets it may use, and the secrets of
// ephemeral containers added later.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	pod, ok := handles(a)
	if !ok {
		return nil
	}
	if a.Operation == admission.Update && a.Subresource == "ephemeralcontainers" {
		return p.validateEphemeral(ctx, a, pod)
	}
	if a.Operation != admission.Create || a.Subresource != "" {
		return nil
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return validateMirror(a, pod)
	}
	if pod.Spec.ServiceAccountName == "" {
		return admission.NewForbidden(a, fmt.Errorf("no service account specified for pod %s/%s", a.Namespace, pod.Name))
	}
	sa, err := p.serviceAccount(ctx, a.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("error looking up service account %s/%s: %v", a.Namespace, pod.Spec.ServiceAccountName, err))
	}
	if enforceMountableSecrets(sa) {
		if err := limitSecretReferences(sa, pod); err != nil {
			return admission.NewForbidden(a, err)
		}
	}
	return nil
}

// serviceAccount finds a ServiceAccount. A missing "default" is looked for again for a
// moment, as upstream's plugin does: the controller creates it just after its namespace.
func (p *Plugin) serviceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	attempts := 1
	if name == DefaultServiceAccountName {
		attempts = 10
	}
	for i := 0; ; i++ {
		obj, err := p.read.Get(ctx, serviceAccounts, namespace, name)
		if err == nil {
			sa, ok := obj.(*corev1.ServiceAccount)
			if !ok {
				return nil, fmt.Errorf("unexpected %T", obj)
			}
			return sa, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		if i+1 >= attempts {
			break
		}
		t := time.NewTimer(p.retryInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccount"}, name)
}

// automount says whether the pod gets the token volume: the pod's choice, else the
// ServiceAccount's, else yes.
func automount(sa *corev1.ServiceAccount, pod *corev1.Pod) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	if sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

func enforceMountableSecrets(sa *corev1.ServiceAccount) bool {
	v, ok := sa.Annotations[EnforceMountableSecretsAnnotation]
	if !ok {
		return false
	}
	b, _ := strconv.ParseBool(v)
	return b
}

// mountToken adds the token volume (unless the pod has a kube-api-access- volume already)
// and mounts it in every container and init container that mounts nothing at MountPath.
func (p *Plugin) mountToken(pod *corev1.Pod) {
	name, has := "", false
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, VolumeNamePrefix) {
			name, has = v.Name, true
			break
		}
	}
	if name == "" {
		name = p.generateName()
	}
	mount := corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: MountPath}
	needed := false
	add := func(containers []corev1.Container) {
		for i := range containers {
			if !mountsAt(containers[i].VolumeMounts, MountPath) {
				containers[i].VolumeMounts = append(containers[i].VolumeMounts, mount)
				needed = true
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	if !has && needed {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: TokenVolumeSource()}})
	}
}

func mountsAt(mounts []corev1.VolumeMount, path string) bool {
	for _, m := range mounts {
		if m.MountPath == path {
			return true
		}
	}
	return false
}

// TokenVolumeSource is the injected volume: the token, the cluster's CA and the namespace.
func TokenVolumeSource() *corev1.ProjectedVolumeSource {
	mode := int32(corev1.ProjectedVolumeSourceDefaultMode)
	exp := int64(TokenExpirationSeconds)
	return &corev1.ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &exp}},
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
				Path:     "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
			}}}},
		},
	}
}

// validateMirror refuses mirror pods that use a ServiceAccount, a secret or a token.
func validateMirror(a *admission.Attributes, pod *corev1.Pod) error {
	if pod.Spec.ServiceAccountName != "" {
		return admission.NewForbidden(a, fmt.Errorf("a mirror pod may not reference service accounts"))
	}
	if len(secretNames(pod)) > 0 {
		return admission.NewForbidden(a, fmt.Errorf("a mirror pod may not reference secrets"))
	}
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				return admission.NewForbidden(a, fmt.Errorf("a mirror pod may not use ServiceAccountToken volume projections"))
			}
		}
	}
	return nil
}

// limitSecretReferences refuses a pod that uses a secret its ServiceAccount does not list.
func limitSecretReferences(sa *corev1.ServiceAccount, pod *corev1.Pod) error {
	mountable := map[string]bool{}
	for _, s := range sa.Secrets {
		mountable[s.Name] = true
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil && !mountable[v.Secret.SecretName] {
			return fmt.Errorf("volume with secret.secretName=\"%s\" is not allowed because service account %s does not reference that secret", v.Secret.SecretName, sa.Name)
		}
	}
	check := func(what string, containers []corev1.Container) error {
		for _, c := range containers {
			if err := containerSecrets(what, c.Name, c.Env, c.EnvFrom, mountable, sa.Name); err != nil {
				return err
			}
		}
		return nil
	}
	if err := check("init container", pod.Spec.InitContainers); err != nil {
		return err
	}
	if err := check("container", pod.Spec.Containers); err != nil {
		return err
	}
	pull := map[string]bool{}
	for _, s := range sa.ImagePullSecrets {
		pull[s.Name] = true
	}
	for i, ref := range pod.Spec.ImagePullSecrets {
		if !pull[ref.Name] {
			return fmt.Errorf(`imagePullSecrets[%d].name="%s" is not allowed because service account %s does not reference that imagePullSecret`, i, ref.Name, sa.Name)
		}
	}
	return nil
}

// validateEphemeral checks the secrets of a pod's ephemeral containers.
func (p *Plugin) validateEphemeral(ctx context.Context, a *admission.Attributes, pod *corev1.Pod) error {
	if pod.Spec.ServiceAccountName == "" {
		return admission.NewForbidden(a, fmt.Errorf("no service account specified for pod %s/%s", a.Namespace, pod.Name))
	}
	sa, err := p.serviceAccount(ctx, a.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("error looking up service account %s/%s: %w", a.Namespace, pod.Spec.ServiceAccountName, err))
	}
	if !enforceMountableSecrets(sa) {
		return nil
	}
	mountable := map[string]bool{}
	for _, s := range sa.Secrets {
		mountable[s.Name] = true
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if err := containerSecrets("ephemeral container", c.Name, c.Env, c.EnvFrom, mountable, sa.Name); err != nil {
			return admission.NewForbidden(a, err)
		}
	}
	return nil
}

func containerSecrets(what, name string, env []corev1.EnvVar, envFrom []corev1.EnvFromSource, mountable map[string]bool, sa string) error {
	for _, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && !mountable[e.ValueFrom.SecretKeyRef.Name] {
			return fmt.Errorf("%s %s with envVar %s referencing secret.secretName=\"%s\" is not allowed because service account %s does not reference that secret", what, name, e.Name, e.ValueFrom.SecretKeyRef.Name, sa)
		}
	}
	for _, e := range envFrom {
		if e.SecretRef != nil && !mountable[e.SecretRef.Name] {
			return fmt.Errorf("%s %s with envFrom referencing secret.secretName=\"%s\" is not allowed because service account %s does not reference that secret", what, name, e.SecretRef.Name, sa)
		}
	}
	return nil
}

// secretNames are the names of the secrets a pod uses anywhere (volumes, projections, the
// secret references of volume plugins, environment and image pull secrets).
func secretNames(pod *corev1.Pod) []string {
	var names []string
	add := func(n string) {
		if n != "" {
			names = append(names, n)
		}
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		add(s.Name)
	}
	visit := func(env []corev1.EnvVar, envFrom []corev1.EnvFromSource) {
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				add(e.ValueFrom.SecretKeyRef.Name)
			}
		}
		for _, e := range envFrom {
			if e.SecretRef != nil {
				add(e.SecretRef.Name)
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		visit(c.Env, c.EnvFrom)
	}
	for _, c := range pod.Spec.Containers {
		visit(c.Env, c.EnvFrom)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		visit(c.Env, c.EnvFrom)
	}
	ref := func(r *corev1.LocalObjectReference) {
		if r != nil {
			add(r.Name)
		}
	}
	for _, v := range pod.Spec.Volumes {
		s := &v.VolumeSource
		switch {
		case s.Secret != nil:
			add(s.Secret.SecretName)
		case s.Projected != nil:
			for _, src := range s.Projected.Sources {
				if src.Secret != nil {
					add(src.Secret.Name)
				}
			}
		case s.AzureFile != nil:
			add(s.AzureFile.SecretName)
		case s.CephFS != nil:
			ref(s.CephFS.SecretRef)
		case s.Cinder != nil:
			ref(s.Cinder.SecretRef)
		case s.FlexVolume != nil:
			ref(s.FlexVolume.SecretRef)
		case s.RBD != nil:
			ref(s.RBD.SecretRef)
		case s.ScaleIO != nil:
			ref(s.ScaleIO.SecretRef)
		case s.ISCSI != nil:
			ref(s.ISCSI.SecretRef)
		case s.StorageOS != nil:
			ref(s.StorageOS.SecretRef)
		case s.CSI != nil:
			ref(s.CSI.NodePublishSecretRef)
		}
	}
	return names
}
