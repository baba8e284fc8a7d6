package node

import corev1 "k8s.io/api/core/v1"

// The references of a pod to the objects a kubelet needs to run it.

func usesServiceAccount(p *corev1.Pod, name string) bool {
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	return sa == name
}

func referencesClaim(p *corev1.Pod, name string) bool {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == name {
			return true
		}
		// A generic ephemeral volume's claim is named after the pod and the volume.
		if v.Ephemeral != nil && p.Name+"-"+v.Name == name {
			return true
		}
	}
	return false
}

// containers are every container of a pod, init and ephemeral ones included.
func containers(p *corev1.Pod, visit func(env []corev1.EnvVar, from []corev1.EnvFromSource) bool) bool {
	for _, c := range p.Spec.InitContainers {
		if visit(c.Env, c.EnvFrom) {
			return true
		}
	}
	for _, c := range p.Spec.Containers {
		if visit(c.Env, c.EnvFrom) {
			return true
		}
	}
	for _, c := range p.Spec.EphemeralContainers {
		if visit(c.Env, c.EnvFrom) {
			return true
		}
	}
	return false
}

func referencesConfigMap(p *corev1.Pod, name string) bool {
	for _, v := range p.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == name {
			return true
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil && s.ConfigMap.Name == name {
					return true
				}
			}
		}
	}
	return containers(p, func(env []corev1.EnvVar, from []corev1.EnvFromSource) bool {
		for _, e := range from {
			if e.ConfigMapRef != nil && e.ConfigMapRef.Name == name {
				return true
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil && e.ValueFrom.ConfigMapKeyRef.Name == name {
				return true
			}
		}
		return false
	})
}

func referencesSecret(p *corev1.Pod, name string) bool {
	for _, s := range p.Spec.ImagePullSecrets {
		if s.Name == name {
			return true
		}
	}
	for _, v := range p.Spec.Volumes {
		if volumeSecret(v, name) {
			return true
		}
	}
	return containers(p, func(env []corev1.EnvVar, from []corev1.EnvFromSource) bool {
		for _, e := range from {
			if e.SecretRef != nil && e.SecretRef.Name == name {
				return true
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == name {
				return true
			}
		}
		return false
	})
}

func volumeSecret(v corev1.Volume, name string) bool {
	ref := func(r *corev1.LocalObjectReference) bool { return r != nil && r.Name == name }
	switch {
	case v.Secret != nil:
		return v.Secret.SecretName == name
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			if s.Secret != nil && s.Secret.Name == name {
				return true
			}
		}
	case v.CSI != nil:
		return ref(v.CSI.NodePublishSecretRef)
	case v.AzureFile != nil:
		return v.AzureFile.SecretName == name
	case v.CephFS != nil:
		return ref(v.CephFS.SecretRef)
	case v.Cinder != nil:
		return ref(v.Cinder.SecretRef)
	case v.FlexVolume != nil:
		return ref(v.FlexVolume.SecretRef)
	case v.ISCSI != nil:
		return ref(v.ISCSI.SecretRef)
	case v.RBD != nil:
		return ref(v.RBD.SecretRef)
	case v.ScaleIO != nil:
		return ref(v.ScaleIO.SecretRef)
	case v.StorageOS != nil:
		return ref(v.StorageOS.SecretRef)
	}
	return false
}
