package defaults

import (
	corev1 "k8s.io/api/core/v1"
)

// setPod applies the Pod-only defaults (those upstream deliberately keeps out
// of pod templates) and then the pod spec defaults.
func setPod(pod *corev1.Pod) {
	for i := range pod.Spec.Containers {
		defaultRequestsFromLimits(&pod.Spec.Containers[i].Resources)
	}
	for i := range pod.Spec.InitContainers {
		defaultRequestsFromLimits(&pod.Spec.InitContainers[i].Resources)
	}
	if pod.Spec.EnableServiceLinks == nil {
		enable := corev1.DefaultEnableServiceLinks
		pod.Spec.EnableServiceLinks = &enable
	}
	if pod.Spec.HostNetwork {
		defaultHostNetworkPorts(pod.Spec.Containers)
		defaultHostNetworkPorts(pod.Spec.InitContainers)
	}
	setPodSpec(&pod.Spec)
}

// defaultRequestsFromLimits copies each limit without a matching request into
// the requests (upstream SetDefaults_Pod).
func defaultRequestsFromLimits(res *corev1.ResourceRequirements) {
	if res.Limits == nil {
		return
	}
	if res.Requests == nil {
		res.Requests = make(corev1.ResourceList, len(res.Limits))
	}
	for name, limit := range res.Limits {
		if _, ok := res.Requests[name]; !ok {
			res.Requests[name] = limit.DeepCopy()
		}
	}
}

// defaultHostNetworkPorts sets hostPort to containerPort for host-network pods.
func defaultHostNetworkPorts(containers []corev1.Container) {
	for i := range containers {
		for j := range containers[i].Ports {
			if containers[i].Ports[j].HostPort == 0 {
				containers[i].Ports[j].HostPort = containers[i].Ports[j].ContainerPort
			}
		}
	}
}

// setPodSpec applies the defaults upstream sets on every PodSpec, whether in a
// Pod or in a pod template (SetDefaults_PodSpec and the nested defaults).
func setPodSpec(spec *corev1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		period := int64(corev1.DefaultTerminationGracePeriodSeconds)
		spec.TerminationGracePeriodSeconds = &period
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	for i := range spec.Volumes {
		setVolume(&spec.Volumes[i])
	}
	for i := range spec.InitContainers {
		setContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		setContainer(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		setContainer((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	roundResourceList(spec.Overhead)
	if spec.Resources != nil {
		roundResourceList(spec.Resources.Limits)
		roundResourceList(spec.Resources.Requests)
	}
}

func setContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = imagePullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil {
			setObjectFieldSelector(vf.FieldRef)
		}
	}
	roundResourceList(c.Resources.Limits)
	roundResourceList(c.Resources.Requests)
	setProbe(c.LivenessProbe)
	setProbe(c.ReadinessProbe)
	setProbe(c.StartupProbe)
	if c.Lifecycle != nil {
		setLifecycleHandler(c.Lifecycle.PostStart)
		setLifecycleHandler(c.Lifecycle.PreStop)
	}
}

func setObjectFieldSelector(fs *corev1.ObjectFieldSelector) {
	if fs.APIVersion == "" {
		fs.APIVersion = "v1"
	}
}

func setProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	setHTTPGetAction(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		service := ""
		p.GRPC.Service = &service
	}
}

func setLifecycleHandler(h *corev1.LifecycleHandler) {
	if h != nil {
		setHTTPGetAction(h.HTTPGet)
	}
}

func setHTTPGetAction(a *corev1.HTTPGetAction) {
	if a == nil {
		return
	}
	if a.Path == "" {
		a.Path = "/"
	}
	if a.Scheme == "" {
		a.Scheme = corev1.URISchemeHTTP
	}
}

// isVolumeSourceEmpty reports whether no volume source is set at all.
func isVolumeSourceEmpty(vs *corev1.VolumeSource) bool {
	return *vs == corev1.VolumeSource{}
}

func setVolume(v *corev1.Volume) {
	if isVolumeSourceEmpty(&v.VolumeSource) {
		v.VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	}
	vs := &v.VolumeSource
	if vs.HostPath != nil && vs.HostPath.Type == nil {
		t := corev1.HostPathUnset
		vs.HostPath.Type = &t
	}
	if vs.Secret != nil && vs.Secret.DefaultMode == nil {
		vs.Secret.DefaultMode = int32Ptr(corev1.SecretVolumeSourceDefaultMode)
	}
	if vs.ConfigMap != nil && vs.ConfigMap.DefaultMode == nil {
		vs.ConfigMap.DefaultMode = int32Ptr(corev1.ConfigMapVolumeSourceDefaultMode)
	}
	if vs.DownwardAPI != nil {
		if vs.DownwardAPI.DefaultMode == nil {
			vs.DownwardAPI.DefaultMode = int32Ptr(corev1.DownwardAPIVolumeSourceDefaultMode)
		}
		setDownwardAPIFiles(vs.DownwardAPI.Items)
	}
	if vs.Projected != nil {
		if vs.Projected.DefaultMode == nil {
			vs.Projected.DefaultMode = int32Ptr(corev1.ProjectedVolumeSourceDefaultMode)
		}
		for i := range vs.Projected.Sources {
			src := &vs.Projected.Sources[i]
			if src.DownwardAPI != nil {
				setDownwardAPIFiles(src.DownwardAPI.Items)
			}
			if src.ServiceAccountToken != nil && src.ServiceAccountToken.ExpirationSeconds == nil {
				hour := int64(3600)
				src.ServiceAccountToken.ExpirationSeconds = &hour
			}
		}
	}
	if vs.ISCSI != nil && vs.ISCSI.ISCSIInterface == "" {
		vs.ISCSI.ISCSIInterface = "default"
	}
	if vs.RBD != nil {
		if vs.RBD.RBDPool == "" {
			vs.RBD.RBDPool = "rbd"
		}
		if vs.RBD.RadosUser == "" {
			vs.RBD.RadosUser = "admin"
		}
		if vs.RBD.Keyring == "" {
			vs.RBD.Keyring = "/etc/ceph/keyring"
		}
	}
	if vs.AzureDisk != nil {
		if vs.AzureDisk.CachingMode == nil {
			mode := corev1.AzureDataDiskCachingReadWrite
			vs.AzureDisk.CachingMode = &mode
		}
		if vs.AzureDisk.FSType == nil {
			fsType := "ext4"
			vs.AzureDisk.FSType = &fsType
		}
		if vs.AzureDisk.ReadOnly == nil {
			readOnly := false
			vs.AzureDisk.ReadOnly = &readOnly
		}
		if vs.AzureDisk.Kind == nil {
			kind := corev1.AzureSharedBlobDisk
			vs.AzureDisk.Kind = &kind
		}
	}
	if vs.ScaleIO != nil {
		if vs.ScaleIO.StorageMode == "" {
			vs.ScaleIO.StorageMode = "ThinProvisioned"
		}
		if vs.ScaleIO.FSType == "" {
			vs.ScaleIO.FSType = "xfs"
		}
	}
	if vs.Ephemeral != nil && vs.Ephemeral.VolumeClaimTemplate != nil {
		claim := &vs.Ephemeral.VolumeClaimTemplate.Spec
		if claim.VolumeMode == nil {
			mode := corev1.PersistentVolumeFilesystem
			claim.VolumeMode = &mode
		}
		roundResourceList(claim.Resources.Limits)
		roundResourceList(claim.Resources.Requests)
	}
	if vs.Image != nil && vs.Image.PullPolicy == "" {
		vs.Image.PullPolicy = imagePullPolicy(vs.Image.Reference)
	}
}

func setDownwardAPIFiles(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		if items[i].FieldRef != nil {
			setObjectFieldSelector(items[i].FieldRef)
		}
	}
}

// roundResourceList rounds every quantity up to milli precision, as upstream
// does for every ResourceList (SetDefaults_ResourceList).
func roundResourceList(list corev1.ResourceList) {
	for name, q := range list {
		q.RoundUp(-3)
		list[name] = q
	}
}
