package defaults

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func ptr[T any](v T) *T { return &v }

func minimalPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
	}
}

func minimalTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
}

func TestPodSpecDefaults(t *testing.T) {
	pod := minimalPod()
	Apply(pod)
	s := pod.Spec
	checks := []struct {
		name      string
		got, want interface{}
	}{
		{"restartPolicy", s.RestartPolicy, corev1.RestartPolicyAlways},
		{"dnsPolicy", s.DNSPolicy, corev1.DNSClusterFirst},
		{"terminationGracePeriodSeconds", s.TerminationGracePeriodSeconds, ptr(int64(30))},
		{"schedulerName", s.SchedulerName, "default-scheduler"},
		{"securityContext", s.SecurityContext, &corev1.PodSecurityContext{}},
		{"enableServiceLinks", s.EnableServiceLinks, ptr(true)},
		{"terminationMessagePath", s.Containers[0].TerminationMessagePath, "/dev/termination-log"},
		{"terminationMessagePolicy", s.Containers[0].TerminationMessagePolicy, corev1.TerminationMessageReadFile},
		{"imagePullPolicy", s.Containers[0].ImagePullPolicy, corev1.PullIfNotPresent},
		{"tolerations", s.Tolerations, []corev1.Toleration(nil)},
		{"preemptionPolicy", s.PreemptionPolicy, (*corev1.PreemptionPolicy)(nil)},
	}
	for _, c := range checks {
		if !apiequality.Semantic.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

func TestImagePullPolicy(t *testing.T) {
	tests := []struct {
		image string
		want  corev1.PullPolicy
	}{
		{"nginx", corev1.PullAlways},
		{"nginx:latest", corev1.PullAlways},
		{"nginx:1.27", corev1.PullIfNotPresent},
		{"registry.example.com:5000/team/app", corev1.PullAlways},
		{"registry.example.com:5000/team/app:v1", corev1.PullIfNotPresent},
		{"nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullIfNotPresent},
		{"nginx:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullAlways},
		{"", corev1.PullIfNotPresent},
	}
	for _, tt := range tests {
		pod := minimalPod()
		pod.Spec.Containers[0].Image = tt.image
		pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: tt.image}}
		Apply(pod)
		if got := pod.Spec.Containers[0].ImagePullPolicy; got != tt.want {
			t.Errorf("image %q: imagePullPolicy = %q, want %q", tt.image, got, tt.want)
		}
		if got := pod.Spec.InitContainers[0].ImagePullPolicy; got != tt.want {
			t.Errorf("image %q: init imagePullPolicy = %q, want %q", tt.image, got, tt.want)
		}
	}
}

func TestContainerDefaults(t *testing.T) {
	pod := minimalPod()
	c := &pod.Spec.Containers[0]
	c.Ports = []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}}
	c.Env = []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}
	c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000}}, PeriodSeconds: 5}
	c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	Apply(pod)

	if c.Ports[0].Protocol != corev1.ProtocolTCP || c.Ports[1].Protocol != corev1.ProtocolUDP {
		t.Errorf("port protocols = %q, %q; want TCP (defaulted) and UDP (kept)", c.Ports[0].Protocol, c.Ports[1].Protocol)
	}
	if got := c.Env[0].ValueFrom.FieldRef.APIVersion; got != "v1" {
		t.Errorf("fieldRef.apiVersion = %q, want v1", got)
	}
	lp := c.LivenessProbe
	if lp.TimeoutSeconds != 1 || lp.PeriodSeconds != 10 || lp.SuccessThreshold != 1 || lp.FailureThreshold != 3 {
		t.Errorf("liveness probe defaults = %d/%d/%d/%d, want 1/10/1/3", lp.TimeoutSeconds, lp.PeriodSeconds, lp.SuccessThreshold, lp.FailureThreshold)
	}
	if lp.HTTPGet.Scheme != corev1.URISchemeHTTP || lp.HTTPGet.Path != "/" {
		t.Errorf("httpGet = %q %q, want HTTP /", lp.HTTPGet.Scheme, lp.HTTPGet.Path)
	}
	if c.ReadinessProbe.PeriodSeconds != 5 {
		t.Errorf("explicit periodSeconds overwritten: %d", c.ReadinessProbe.PeriodSeconds)
	}
	if c.ReadinessProbe.GRPC.Service == nil || *c.ReadinessProbe.GRPC.Service != "" {
		t.Errorf("grpc.service = %v, want \"\"", c.ReadinessProbe.GRPC.Service)
	}
	if c.Lifecycle.PreStop.HTTPGet.Scheme != corev1.URISchemeHTTP {
		t.Errorf("lifecycle httpGet scheme = %q", c.Lifecycle.PreStop.HTTPGet.Scheme)
	}
	wantReq := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	if !apiequality.Semantic.DeepEqual(c.Resources.Requests, wantReq) {
		t.Errorf("requests = %v, want %v (explicit cpu kept, memory from limits)", c.Resources.Requests, wantReq)
	}
}

func TestRequestsFromLimitsOnlyWhenNoRequests(t *testing.T) {
	pod := minimalPod()
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	pod.Spec.InitContainers = []corev1.Container{{Name: "i", Image: "busybox", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}
	Apply(pod)
	if got := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("requests.cpu = %v, want 1", got.String())
	}
	if got := pod.Spec.InitContainers[0].Resources.Requests[corev1.ResourceMemory]; got.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("init requests.memory = %v, want 1Gi", got.String())
	}
}

func TestVolumeDefaults(t *testing.T) {
	pod := minimalPod()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
		{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
		}}}},
		{Name: "dapi", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}}},
		{Name: "empty", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "none"},
		{Name: "custom", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: ptr(int32(0400))}}},
	}
	Apply(pod)
	v := pod.Spec.Volumes
	if *v[0].ConfigMap.DefaultMode != 0644 || *v[1].Secret.DefaultMode != 0644 || *v[2].Projected.DefaultMode != 0644 || *v[3].DownwardAPI.DefaultMode != 0644 {
		t.Errorf("defaultMode not 0644: %o %o %o %o", *v[0].ConfigMap.DefaultMode, *v[1].Secret.DefaultMode, *v[2].Projected.DefaultMode, *v[3].DownwardAPI.DefaultMode)
	}
	if got := *v[2].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds; got != 3600 {
		t.Errorf("serviceAccountToken.expirationSeconds = %d, want 3600", got)
	}
	if got := v[2].Projected.Sources[1].DownwardAPI.Items[0].FieldRef.APIVersion; got != "v1" {
		t.Errorf("projected fieldRef.apiVersion = %q", got)
	}
	if v[4].HostPath.Type == nil || *v[4].HostPath.Type != corev1.HostPathUnset {
		t.Errorf("hostPath.type = %v, want \"\"", v[4].HostPath.Type)
	}
	if v[5].EmptyDir == nil || v[5].EmptyDir.Medium != "" {
		t.Errorf("emptyDir changed: %#v", v[5].EmptyDir)
	}
	if v[6].EmptyDir == nil {
		t.Errorf("volume without a source did not default to emptyDir")
	}
	if *v[7].Secret.DefaultMode != 0400 {
		t.Errorf("explicit defaultMode overwritten: %o", *v[7].Secret.DefaultMode)
	}
}

func TestExplicitPodValuesKept(t *testing.T) {
	pod := minimalPod()
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.DNSPolicy = corev1.DNSDefault
	pod.Spec.TerminationGracePeriodSeconds = ptr(int64(5))
	pod.Spec.SchedulerName = "custom"
	pod.Spec.EnableServiceLinks = ptr(false)
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(int64(1000))}
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
	pod.Spec.Containers[0].TerminationMessagePath = "/tmp/msg"
	pod.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	want := pod.DeepCopy()
	Apply(pod)
	if !apiequality.Semantic.DeepEqual(pod, want) {
		t.Errorf("explicit values changed:\n got %#v\nwant %#v", pod.Spec, want.Spec)
	}
}

func TestHostNetworkPorts(t *testing.T) {
	pod := minimalPod()
	pod.Spec.HostNetwork = true
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080}}
	Apply(pod)
	if got := pod.Spec.Containers[0].Ports[0].HostPort; got != 8080 {
		t.Errorf("hostPort = %d, want 8080", got)
	}
}

func TestDeploymentDefaults(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{Template: minimalTemplate()}}
	Apply(d)
	if *d.Spec.Replicas != 1 {
		t.Errorf("replicas = %d", *d.Spec.Replicas)
	}
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("strategy = %q", d.Spec.Strategy.Type)
	}
	ru := d.Spec.Strategy.RollingUpdate
	if ru == nil || *ru.MaxSurge != intstr.FromString("25%") || *ru.MaxUnavailable != intstr.FromString("25%") {
		t.Errorf("rollingUpdate = %#v, want 25%%/25%% strings", ru)
	}
	if *d.Spec.RevisionHistoryLimit != 10 || *d.Spec.ProgressDeadlineSeconds != 600 {
		t.Errorf("revisionHistoryLimit/progressDeadlineSeconds = %d/%d", *d.Spec.RevisionHistoryLimit, *d.Spec.ProgressDeadlineSeconds)
	}
	ps := d.Spec.Template.Spec
	if ps.RestartPolicy != corev1.RestartPolicyAlways || ps.DNSPolicy != corev1.DNSClusterFirst || *ps.TerminationGracePeriodSeconds != 30 ||
		ps.SchedulerName != corev1.DefaultSchedulerName || ps.SecurityContext == nil || ps.Containers[0].ImagePullPolicy != corev1.PullAlways ||
		ps.Containers[0].TerminationMessagePath != corev1.TerminationMessagePathDefault {
		t.Errorf("template pod spec not defaulted: %#v", ps)
	}
	// Pod-only defaults stay out of templates, as upstream.
	if ps.EnableServiceLinks != nil {
		t.Errorf("template enableServiceLinks = %v, want nil", *ps.EnableServiceLinks)
	}
}

func TestDeploymentExplicitValuesKept(t *testing.T) {
	one := intstr.FromInt32(1)
	zero := intstr.FromInt32(0)
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{
		Replicas:                ptr(int32(0)),
		Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &zero}},
		RevisionHistoryLimit:    ptr(int32(2)),
		ProgressDeadlineSeconds: ptr(int32(60)),
		Template:                minimalTemplate(),
	}}
	Apply(d)
	if *d.Spec.Replicas != 0 || *d.Spec.Strategy.RollingUpdate.MaxSurge != one || *d.Spec.Strategy.RollingUpdate.MaxUnavailable != zero ||
		*d.Spec.RevisionHistoryLimit != 2 || *d.Spec.ProgressDeadlineSeconds != 60 {
		t.Errorf("explicit values changed: %#v", d.Spec)
	}

	recreate := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}, Template: minimalTemplate()}}
	Apply(recreate)
	if recreate.Spec.Strategy.RollingUpdate != nil {
		t.Errorf("Recreate strategy got rollingUpdate %#v", recreate.Spec.Strategy.RollingUpdate)
	}
}

func TestReplicaSetDefaults(t *testing.T) {
	rs := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Template: minimalTemplate()}}
	Apply(rs)
	if rs.Spec.Replicas == nil || *rs.Spec.Replicas != 1 {
		t.Errorf("replicas = %v", rs.Spec.Replicas)
	}
	if rs.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("template restartPolicy = %q", rs.Spec.Template.Spec.RestartPolicy)
	}
	rs2 := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(3))}}
	Apply(rs2)
	if *rs2.Spec.Replicas != 3 {
		t.Errorf("explicit replicas changed: %d", *rs2.Spec.Replicas)
	}
}

func TestReplicationControllerDefaults(t *testing.T) {
	tmpl := minimalTemplate()
	rc := &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Template: &tmpl}}
	Apply(rc)
	if rc.Spec.Replicas == nil || *rc.Spec.Replicas != 1 {
		t.Errorf("replicas = %v", rc.Spec.Replicas)
	}
	if rc.Spec.Selector["app"] != "web" || len(rc.Spec.Selector) != 1 {
		t.Errorf("selector = %v, want the template's labels", rc.Spec.Selector)
	}
	if rc.Labels["app"] != "web" || len(rc.Labels) != 1 {
		t.Errorf("labels = %v, want the template's labels", rc.Labels)
	}
	rc.Spec.Template.Labels["app"] = "changed"
	if rc.Spec.Selector["app"] != "web" || rc.Labels["app"] != "web" {
		t.Error("selector or labels share the template's map")
	}
	if rc.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("template restartPolicy = %q", rc.Spec.Template.Spec.RestartPolicy)
	}

	// Given values are kept; a template without labels defaults nothing from them.
	tmpl2 := minimalTemplate()
	given := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"mine": "x"}},
		Spec: corev1.ReplicationControllerSpec{Replicas: ptr(int32(0)), Selector: map[string]string{"app": "web", "tier": "a"}, Template: &tmpl2}}
	Apply(given)
	if *given.Spec.Replicas != 0 || len(given.Spec.Selector) != 2 || given.Labels["mine"] != "x" || len(given.Labels) != 1 {
		t.Errorf("given values changed: replicas %d selector %v labels %v", *given.Spec.Replicas, given.Spec.Selector, given.Labels)
	}
	bare := &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Template: &corev1.PodTemplateSpec{}}}
	Apply(bare)
	if bare.Spec.Selector != nil || bare.Labels != nil {
		t.Errorf("defaulted from a template without labels: selector %v labels %v", bare.Spec.Selector, bare.Labels)
	}
	Apply(&corev1.ReplicationController{}) // no template: no panic
}

func TestServiceDefaults(t *testing.T) {
	tests := []struct {
		name  string
		in    corev1.ServiceSpec
		check func(t *testing.T, s corev1.ServiceSpec)
	}{
		{
			name: "clusterIP",
			in:   corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}, {Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")}}},
			check: func(t *testing.T, s corev1.ServiceSpec) {
				if s.Type != corev1.ServiceTypeClusterIP || s.SessionAffinity != corev1.ServiceAffinityNone {
					t.Errorf("type/sessionAffinity = %q/%q", s.Type, s.SessionAffinity)
				}
				if s.Ports[0].Protocol != corev1.ProtocolTCP || s.Ports[0].TargetPort != intstr.FromInt32(80) {
					t.Errorf("port 0 = %#v", s.Ports[0])
				}
				if s.Ports[1].Protocol != corev1.ProtocolUDP || s.Ports[1].TargetPort != intstr.FromString("dns") {
					t.Errorf("explicit port values changed: %#v", s.Ports[1])
				}
				if s.InternalTrafficPolicy == nil || *s.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyCluster {
					t.Errorf("internalTrafficPolicy = %v", s.InternalTrafficPolicy)
				}
				if s.ExternalTrafficPolicy != "" || s.AllocateLoadBalancerNodePorts != nil {
					t.Errorf("externalTrafficPolicy/allocateLoadBalancerNodePorts set on ClusterIP: %q %v", s.ExternalTrafficPolicy, s.AllocateLoadBalancerNodePorts)
				}
				if s.IPFamilyPolicy != nil || s.IPFamilies != nil || s.ClusterIP != "" {
					t.Errorf("allocator fields touched: %v %v %q", s.IPFamilyPolicy, s.IPFamilies, s.ClusterIP)
				}
			},
		},
		{
			name: "nodePort",
			in:   corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}}},
			check: func(t *testing.T, s corev1.ServiceSpec) {
				if s.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster {
					t.Errorf("externalTrafficPolicy = %q", s.ExternalTrafficPolicy)
				}
			},
		},
		{
			name: "loadBalancer keeps Local",
			in:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, Ports: []corev1.ServicePort{{Port: 80}}},
			check: func(t *testing.T, s corev1.ServiceSpec) {
				if s.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
					t.Errorf("externalTrafficPolicy = %q", s.ExternalTrafficPolicy)
				}
				if s.AllocateLoadBalancerNodePorts == nil || !*s.AllocateLoadBalancerNodePorts {
					t.Errorf("allocateLoadBalancerNodePorts = %v", s.AllocateLoadBalancerNodePorts)
				}
			},
		},
		{
			name: "externalName",
			in:   corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"},
			check: func(t *testing.T, s corev1.ServiceSpec) {
				if s.InternalTrafficPolicy != nil {
					t.Errorf("internalTrafficPolicy set on ExternalName")
				}
			},
		},
		{
			name: "clientIP affinity",
			in:   corev1.ServiceSpec{SessionAffinity: corev1.ServiceAffinityClientIP},
			check: func(t *testing.T, s corev1.ServiceSpec) {
				if s.SessionAffinityConfig == nil || *s.SessionAffinityConfig.ClientIP.TimeoutSeconds != 10800 {
					t.Errorf("sessionAffinityConfig = %#v", s.SessionAffinityConfig)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &corev1.Service{Spec: tt.in}
			Apply(svc)
			tt.check(t, svc.Spec)
		})
	}
}

func TestNamespaceDefaults(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"x": "y"}}}
	Apply(ns)
	if ns.Labels[corev1.LabelMetadataName] != "team-a" || ns.Labels["x"] != "y" {
		t.Errorf("labels = %v", ns.Labels)
	}
	if ns.Status.Phase != corev1.NamespaceActive {
		t.Errorf("phase = %q", ns.Status.Phase)
	}
	if len(ns.Spec.Finalizers) != 1 || ns.Spec.Finalizers[0] != corev1.FinalizerKubernetes {
		t.Errorf("finalizers = %v", ns.Spec.Finalizers)
	}
	Apply(ns)
	if len(ns.Spec.Finalizers) != 1 {
		t.Errorf("finalizer added twice: %v", ns.Spec.Finalizers)
	}

	// A namespace being finalized keeps its (removed) finalizers and phase.
	now := metav1.Now()
	terminating := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "old", ResourceVersion: "7", DeletionTimestamp: &now},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
	}
	Apply(terminating)
	if len(terminating.Spec.Finalizers) != 0 || terminating.Status.Phase != corev1.NamespaceTerminating {
		t.Errorf("terminating namespace changed: %v %q", terminating.Spec.Finalizers, terminating.Status.Phase)
	}
}

func TestSimpleKindDefaults(t *testing.T) {
	secret := &corev1.Secret{}
	Apply(secret)
	if secret.Type != corev1.SecretTypeOpaque {
		t.Errorf("secret type = %q", secret.Type)
	}
	tls := &corev1.Secret{Type: corev1.SecretTypeTLS}
	Apply(tls)
	if tls.Type != corev1.SecretTypeTLS {
		t.Errorf("explicit secret type changed: %q", tls.Type)
	}

	ep := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80}, {Port: 53, Protocol: corev1.ProtocolUDP}}}}}
	Apply(ep)
	if ep.Subsets[0].Ports[0].Protocol != corev1.ProtocolTCP || ep.Subsets[0].Ports[1].Protocol != corev1.ProtocolUDP {
		t.Errorf("endpoints ports = %#v", ep.Subsets[0].Ports)
	}

	slice := &discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Port: ptr(int32(80))}, {Name: ptr("dns"), Protocol: ptr(corev1.ProtocolUDP)}}}
	Apply(slice)
	if *slice.Ports[0].Name != "" || *slice.Ports[0].Protocol != corev1.ProtocolTCP || *slice.Ports[1].Name != "dns" || *slice.Ports[1].Protocol != corev1.ProtocolUDP {
		t.Errorf("endpointslice ports = %v/%v %v/%v", *slice.Ports[0].Name, *slice.Ports[0].Protocol, *slice.Ports[1].Name, *slice.Ports[1].Protocol)
	}

	ic := &networkingv1.IngressClass{Spec: networkingv1.IngressClassSpec{Controller: "example.com/ingress", Parameters: &networkingv1.IngressClassParametersReference{Kind: "Params", Name: "p"}}}
	Apply(ic)
	if ic.Spec.Parameters.Scope == nil || *ic.Spec.Parameters.Scope != networkingv1.IngressClassParametersReferenceScopeCluster {
		t.Errorf("ingressclass parameters scope = %v", ic.Spec.Parameters.Scope)
	}

	node := &corev1.Node{Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}
	Apply(node)
	if got := node.Status.Allocatable[corev1.ResourceCPU]; got.Cmp(resource.MustParse("4")) != 0 {
		t.Errorf("node allocatable = %v", node.Status.Allocatable)
	}

	cm := &corev1.ConfigMap{}
	Apply(cm)
	if cm.Data == nil {
		t.Errorf("configmap data not defaulted to an empty map")
	}
}

func TestNoDefaultsKinds(t *testing.T) {
	objs := []runtime.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa"}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}},
		&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "i"}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}},
	}
	for _, obj := range objs {
		before := obj.DeepCopyObject()
		Apply(obj)
		if !apiequality.Semantic.DeepEqual(before, obj) {
			t.Errorf("%T changed by Apply", obj)
		}
	}
	Apply(nil)
	Apply((*corev1.Pod)(nil))
}

func TestResourceRounding(t *testing.T) {
	pod := minimalPod()
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.0001")}
	Apply(pod)
	if got := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.String() != "1m" {
		t.Errorf("cpu request = %s, want 1m (rounded up to milli)", got.String())
	}
}
