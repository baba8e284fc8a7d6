package noderestriction

import corev1 "k8s.io/api/core/v1"

// refs says which kinds of objects a pod refers to.
type refs struct {
	secrets, configMaps, claims, trustBundles bool
}

func podRefs(p *corev1.Pod) refs {
	var r refs
	if len(p.Spec.ImagePullSecrets) > 0 {
		r.secrets = true
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.Secret != nil:
			r.secrets = true
		case v.ConfigMap != nil:
			r.configMaps = true
		case v.PersistentVolumeClaim != nil, v.Ephemeral != nil:
			r.claims = true
		case v.CSI != nil && v.CSI.NodePublishSecretRef != nil:
			r.secrets = true
		case v.AzureFile != nil, v.CephFS != nil && v.CephFS.SecretRef != nil, v.Cinder != nil && v.Cinder.SecretRef != nil,
			v.FlexVolume != nil && v.FlexVolume.SecretRef != nil, v.ISCSI != nil && v.ISCSI.SecretRef != nil,
			v.RBD != nil && v.RBD.SecretRef != nil, v.ScaleIO != nil && v.ScaleIO.SecretRef != nil,
			v.StorageOS != nil && v.StorageOS.SecretRef != nil:
			r.secrets = true
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				switch {
				case s.Secret != nil:
					r.secrets = true
				case s.ConfigMap != nil:
					r.configMaps = true
				case s.ClusterTrustBundle != nil:
					r.trustBundles = true
				}
			}
		}
	}
	visit := func(env []corev1.EnvVar, from []corev1.EnvFromSource) {
		for _, e := range from {
			r.secrets = r.secrets || e.SecretRef != nil
			r.configMaps = r.configMaps || e.ConfigMapRef != nil
		}
		for _, e := range env {
			if e.ValueFrom != nil {
				r.secrets = r.secrets || e.ValueFrom.SecretKeyRef != nil
				r.configMaps = r.configMaps || e.ValueFrom.ConfigMapKeyRef != nil
			}
		}
	}
	for _, c := range p.Spec.InitContainers {
		visit(c.Env, c.EnvFrom)
	}
	for _, c := range p.Spec.Containers {
		visit(c.Env, c.EnvFrom)
	}
	for _, c := range p.Spec.EphemeralContainers {
		visit(c.Env, c.EnvFrom)
	}
	return r
}
