package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func podWith(mutate func(p *corev1.Pod)) *corev1.Pod {
	p := validPod()
	mutate(p)
	return p
}

func TestValidatePodCreate(t *testing.T) {
	c0 := "spec.containers[0]"
	runCreateCases(t, []createCase{
		{name: "valid", obj: validPod()},
		{name: "valid without namespace (caller checks it)", obj: podWith(func(p *corev1.Pod) { p.Namespace = "" })},
		{name: "valid sidecar with probe", obj: podWith(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "envoy", RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways),
				ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(15000)}}, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}}}
		})},
		{name: "missing name", obj: podWith(func(p *corev1.Pod) { p.Name = "" }), errors: []want{req("metadata.name")}},
		{name: "name not a subdomain", obj: podWith(func(p *corev1.Pod) { p.Name = "Web_1" }), errors: []want{inv("metadata.name")}},
		{name: "invalid namespace", obj: podWith(func(p *corev1.Pod) { p.Namespace = "Default" }), errors: []want{inv("metadata.namespace")}},
		{name: "invalid label", obj: podWith(func(p *corev1.Pod) { p.Labels = map[string]string{"app": "bad value"} }), errors: []want{inv("metadata.labels")}},
		{name: "non-standard finalizer", obj: podWith(func(p *corev1.Pod) { p.Finalizers = []string{"cleanup"} }), errors: []want{invd("metadata.finalizers[0]", "neither a standard finalizer name nor is it fully qualified")}},
		{name: "no containers", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers = nil }), errors: []want{req("spec.containers")}},
		{name: "container name required", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Name = "" }), errors: []want{req(c0 + ".name")}},
		{name: "container name not a DNS label", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Name = "Nginx" }), errors: []want{inv(c0 + ".name")}},
		{name: "duplicate container names", obj: podWith(func(p *corev1.Pod) {
			c := p.Spec.Containers[0]
			c.Ports = nil
			p.Spec.Containers = append(p.Spec.Containers, c)
		}), errors: []want{dup("spec.containers[1].name")}},
		{name: "init container name clashes with container", obj: podWith(func(p *corev1.Pod) {
			c := p.Spec.Containers[0]
			c.Ports = nil
			p.Spec.InitContainers = []corev1.Container{c}
		}), errors: []want{dup("spec.initContainers[0].name")}},
		{name: "image required", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" }), errors: []want{req(c0 + ".image")}},
		{name: "image whitespace", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Image = " nginx" }), errors: []want{invd(c0+".image", "leading or trailing whitespace")}},
		{name: "port out of range", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 70000 }), errors: []want{inv(c0 + ".ports[0].containerPort")}},
		{name: "port required", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 0 }), errors: []want{req(c0 + ".ports[0].containerPort")}},
		{name: "host port out of range", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].HostPort = -1 }), errors: []want{inv(c0 + ".ports[0].hostPort")}},
		{name: "port name not IANA_SVC_NAME", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Name = "http_port" }), errors: []want{inv(c0 + ".ports[0].name")}},
		{name: "duplicate port names", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: "http", ContainerPort: 81, Protocol: corev1.ProtocolTCP})
		}), errors: []want{dup(c0 + ".ports[1].name")}},
		{name: "port protocol unsupported", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = "ICMP" }), errors: []want{unsup(c0 + ".ports[0].protocol")}},
		{name: "host port conflict", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}, {ContainerPort: 81, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
		}), errors: []want{dup(c0 + ".ports[1].hostPort")}},
		{name: "restartPolicy unsupported", obj: podWith(func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" }), errors: []want{unsup("spec.restartPolicy")}},
		{name: "dnsPolicy unsupported", obj: podWith(func(p *corev1.Pod) { p.Spec.DNSPolicy = "Custom" }), errors: []want{unsup("spec.dnsPolicy")}},
		{name: "dnsPolicy None needs dnsConfig", obj: podWith(func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone }), errors: []want{req("spec.dnsConfig")}},
		{name: "requests exceed limits", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			}
		}), errors: []want{invd(c0+".resources.requests", "must be less than or equal to cpu limit of 500m")}},
		{name: "negative request", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1")}
		}), errors: []want{invd(c0+".resources.requests[memory]", "must be greater than or equal to 0")}},
		{name: "unknown resource name", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"gpu": resource.MustParse("1")}
		}), errors: []want{invd(c0+".resources.requests[gpu]", "must be a standard resource type or fully qualified"), invd(c0+".resources.requests[gpu]", "must be a standard resource for containers")}},
		{name: "extended resource needs equal limit", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}
		}), errors: []want{req(c0 + ".resources.limits")}},
		{name: "valid extended resource", obj: podWith(func(p *corev1.Pod) {
			q := corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: q, Limits: q}
		})},
		{name: "env var name invalid", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Env[0].Name = "A=B" }), errors: []want{inv(c0 + ".env[0].name")}},
		{name: "env var name required", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Env[0].Name = "" }), errors: []want{req(c0 + ".env[0].name")}},
		{name: "env value and valueFrom", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].Env[0].ValueFrom = &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}
		}), errors: []want{invd(c0+".env[0].valueFrom", "may not be specified when `value` is not empty")}},
		{name: "env fieldRef unsupported path", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].Env[0] = corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.hostname"}}}
		}), errors: []want{unsup(c0 + ".env[0].valueFrom.fieldRef.fieldPath")}},
		{name: "env from labels subscript", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].Env[0] = corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels['app']"}}}
		})},
		{name: "secretKeyRef key required", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].Env[0] = corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}
		}), errors: []want{req(c0 + ".env[0].valueFrom.secretKeyRef.key")}},
		{name: "envFrom needs a source", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{Prefix: "P_"}} }), errors: []want{inv(c0 + ".envFrom")}},
		{name: "volume names unique", obj: podWith(func(p *corev1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, p.Spec.Volumes[0]) }), errors: []want{dup("spec.volumes[1].name")}},
		{name: "volume name invalid", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Volumes[0].Name = "Data"
			p.Spec.Containers[0].VolumeMounts = nil
		}), errors: []want{inv("spec.volumes[0].name")}},
		{name: "volume with two sources", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Volumes[0].HostPath = &corev1.HostPathVolumeSource{Path: "/tmp", Type: ptr(corev1.HostPathUnset)}
		}), errors: []want{forbd("spec.volumes[0].hostPath", "may not specify more than 1 volume type"), notFound(c0 + ".volumeMounts[0].name")}},
		{name: "volume without source", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "empty"})
		}), errors: []want{req("spec.volumes[1]")}},
		{name: "configMap volume name required", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{DefaultMode: ptr(int32(0644))}}})
		}), errors: []want{req("spec.volumes[1].configMap.name")}},
		{name: "secret volume mode out of range", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: ptr(int32(01000))}}})
		}), errors: []want{inv("spec.volumes[1].secret.defaultMode")}},
		{name: "volumeMount references a missing volume", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].Name = "cache" }), errors: []want{notFound(c0 + ".volumeMounts[0].name")}},
		{name: "volumeMount path required", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].MountPath = "" }), errors: []want{req(c0 + ".volumeMounts[0].mountPath")}},
		{name: "volumeMount path unique", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, p.Spec.Containers[0].VolumeMounts[0])
		}), errors: []want{invd(c0+".volumeMounts[1].mountPath", "must be unique")}},
		{name: "subPath with backsteps", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPath = "../etc" }), errors: []want{invd(c0+".volumeMounts[0].subPath", "must not contain '..'")}},
		{name: "liveness probe needs a handler", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
		}), errors: []want{req(c0 + ".livenessProbe")}},
		{name: "liveness successThreshold must be 1", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 2, FailureThreshold: 3}
		}), errors: []want{invd(c0+".livenessProbe.successThreshold", "must be 1")}},
		{name: "probe httpGet port invalid", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(0), Scheme: corev1.URISchemeHTTP}}, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
		}), errors: []want{inv(c0 + ".readinessProbe.httpGet.port")}},
		{name: "probe on plain init container", obj: podWith(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", ImagePullPolicy: corev1.PullAlways, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}}
		}), errors: []want{forbd("spec.initContainers[0].readinessProbe", "restartPolicy=Always")}},
		{name: "imagePullPolicy unsupported", obj: podWith(func(p *corev1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" }), errors: []want{unsup(c0 + ".imagePullPolicy")}},
		{name: "terminationGracePeriodSeconds required", obj: podWith(func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = nil }), errors: []want{req("spec.terminationGracePeriodSeconds")}},
		{name: "activeDeadlineSeconds zero", obj: podWith(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(0)) }), errors: []want{inv("spec.activeDeadlineSeconds")}},
		{name: "hostname not a label", obj: podWith(func(p *corev1.Pod) { p.Spec.Hostname = "a.b" }), errors: []want{inv("spec.hostname")}},
		{name: "nodeName invalid", obj: podWith(func(p *corev1.Pod) { p.Spec.NodeName = "Node_1" }), errors: []want{inv("spec.nodeName")}},
		{name: "serviceAccountName invalid", obj: podWith(func(p *corev1.Pod) { p.Spec.ServiceAccountName = "SA" }), errors: []want{inv("spec.serviceAccountName")}},
		{name: "toleration with empty key must use Exists", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpEqual, Value: "x"}}
		}), errors: []want{inv("spec.tolerations[0].operator")}},
		{name: "toleration effect unsupported", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: "Never"}}
		}), errors: []want{unsup("spec.tolerations[0].effect")}},
		{name: "hostNetwork hostPort mismatch", obj: podWith(func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports[0].HostPort = 8080
		}), errors: []want{invd(c0+".ports[0].hostPort", "must match `containerPort` when `hostNetwork` is true")}},
		{name: "ephemeral containers forbidden on create", obj: podWith(func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox", ImagePullPolicy: corev1.PullAlways, TerminationMessagePolicy: corev1.TerminationMessageReadFile}}}
		}), errors: []want{forbd("spec.ephemeralContainers", "cannot be set on create")}},
		{name: "nodeName with scheduling gates", obj: podWith(func(p *corev1.Pod) {
			p.Spec.NodeName = "node-1"
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/gate"}}
		}), errors: []want{forb("spec.nodeName")}},
		{name: "affinity weight out of range", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 0}}}}
		}), errors: []want{inv("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight")}},
		{name: "topology spread maxSkew", obj: podWith(func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 0, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule}}
		}), errors: []want{inv("spec.topologySpreadConstraints[0].maxSkew")}},
		{name: "projected token without service account", obj: podWith(func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "tok", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr(int32(0644)),
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr(int64(3600))}}}}}})
		}), errors: []want{forb("spec.volumes[1].projected.sources[0].serviceAccountToken")}},
		{name: "mirror pod annotation needs nodeName", obj: podWith(func(p *corev1.Pod) {
			p.Annotations = map[string]string{"kubernetes.io/config.mirror": "x"}
		}), errors: []want{inv("metadata.annotations[kubernetes.io/config.mirror]")}},
	})
}

func TestValidatePodUpdate(t *testing.T) {
	old := stored(validPod())
	upd := func(mutate func(p *corev1.Pod)) *corev1.Pod {
		p := old.DeepCopy()
		mutate(p)
		return p
	}
	old.Spec.Tolerations = []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(60))}}
	old.Spec.ActiveDeadlineSeconds = ptr(int64(100))
	gated := old.DeepCopy()
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/a"}, {Name: "example.com/b"}}

	runUpdateCases(t, []updateCase{
		{name: "no change", old: old, obj: upd(func(p *corev1.Pod) {})},
		{name: "image change", old: old, obj: upd(func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:1.28" })},
		{name: "labels change", old: old, obj: upd(func(p *corev1.Pod) { p.Labels = map[string]string{"tier": "web"} })},
		{name: "lower activeDeadlineSeconds", old: old, obj: upd(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(50)) })},
		{name: "raise activeDeadlineSeconds", old: old, obj: upd(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(200)) }),
			errors: []want{invd("spec.activeDeadlineSeconds", "must be less than or equal to previous value")}},
		{name: "unset activeDeadlineSeconds", old: old, obj: upd(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = nil }),
			errors: []want{invd("spec.activeDeadlineSeconds", "must not update from a positive integer to nil value")}},
		{name: "add toleration", old: old, obj: upd(func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "b", Operator: corev1.TolerationOpExists})
		})},
		{name: "change tolerationSeconds", old: old, obj: upd(func(p *corev1.Pod) { p.Spec.Tolerations[0].TolerationSeconds = ptr(int64(10)) })},
		{name: "remove toleration", old: old, obj: upd(func(p *corev1.Pod) { p.Spec.Tolerations = nil }),
			errors: []want{forbd("spec.tolerations", "existing toleration can not be modified except its tolerationSeconds")}},
		{name: "change container name", old: old, obj: upd(func(p *corev1.Pod) { p.Spec.Containers[0].Name = "web" }),
			errors: []want{forbd("spec", "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)")}},
		{name: "change restartPolicy", old: old, obj: upd(func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }),
			errors: []want{forbd("spec", "pod updates may not change fields other than")}},
		{name: "add container", old: old, obj: upd(func(p *corev1.Pod) {
			c := p.Spec.Containers[0]
			c.Name, c.Ports = "second", nil
			p.Spec.Containers = append(p.Spec.Containers, c)
		}), errors: []want{forbd("spec.containers", "pod updates may not add or remove containers")}},
		{name: "clear image", old: old, obj: upd(func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" }),
			errors: []want{req("spec.containers[0].image"), req("spec.containers[0].image")}},
		{name: "remove scheduling gate", old: gated, obj: func() *corev1.Pod {
			p := gated.DeepCopy()
			p.Spec.SchedulingGates = p.Spec.SchedulingGates[1:]
			return p
		}()},
		{name: "add scheduling gate", old: gated, obj: func() *corev1.Pod {
			p := gated.DeepCopy()
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: "example.com/c"})
			return p
		}(), errors: []want{forbd("spec.schedulingGates[2].name", "only deletion is allowed")}},
		{name: "terminationGracePeriodSeconds change", old: old, obj: upd(func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(5)) }),
			errors: []want{forbd("spec", "pod updates may not change fields other than")}},
		{name: "name is immutable", old: old, obj: upd(func(p *corev1.Pod) { p.Name = "other" }), errors: []want{immutable("metadata.name")}},
		{name: "unconditional update", old: old, obj: upd(func(p *corev1.Pod) { p.ResourceVersion = "" })},
	})
}

func TestPodUpdateDiffInMessage(t *testing.T) {
	old := stored(validPod())
	p := old.DeepCopy()
	p.Spec.Containers[0].Name = "renamed"
	errs := ValidateUpdate(p, old)
	if len(errs) != 1 || !strings.Contains(errs[0].Detail, "renamed") {
		t.Fatalf("expected one forbidden error with a diff naming the change, got %v", errs)
	}
}

func TestValidatePodStatusUpdate(t *testing.T) {
	old := stored(validPod())
	old.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort}
	st := func(mutate func(p *corev1.Pod)) *corev1.Pod {
		p := old.DeepCopy()
		mutate(p)
		return p
	}
	terminated := old.DeepCopy()
	terminated.Spec.RestartPolicy = corev1.RestartPolicyNever
	terminated.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "nginx", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}}

	runUpdateCases(t, []updateCase{
		{name: "running with IPs", status: true, old: old, obj: st(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.PodIP = "10.244.0.5"
			p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.0.5"}, {IP: "fd00::5"}}
			p.Status.HostIP = "192.168.1.10"
			p.Status.HostIPs = []corev1.HostIP{{IP: "192.168.1.10"}}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: "example.com/ready", Status: corev1.ConditionTrue}}
		})},
		{name: "invalid pod IP", status: true, old: old, obj: st(func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.0"}} }),
			errors: []want{inv("status.podIPs[0].ip")}},
		{name: "two IPs of one family", status: true, old: old, obj: st(func(p *corev1.Pod) {
			p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}}
		}), errors: []want{invd("status.podIPs", "may specify no more than one IP for each IP family")}},
		{name: "hostIP mismatch", status: true, old: old, obj: st(func(p *corev1.Pod) {
			p.Status.HostIP = "192.168.1.10"
			p.Status.HostIPs = []corev1.HostIP{{IP: "192.168.1.11"}}
		}), errors: []want{invd("status.hostIPs[0].ip", "must be equal to `hostIP`")}},
		{name: "qosClass immutable", status: true, old: old, obj: st(func(p *corev1.Pod) { p.Status.QOSClass = corev1.PodQOSGuaranteed }),
			errors: []want{immutable("status.qosClass")}},
		{name: "nodeName via status", status: true, old: old, obj: st(func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }),
			errors: []want{forbd("status.nodeName", "may not be changed directly")}},
		{name: "bad condition type", status: true, old: old, obj: st(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: "bad type", Status: corev1.ConditionTrue}}
		}), errors: []want{inv("status.conditions[0].Type")}},
		{name: "terminated container restarted", status: true, old: terminated, obj: func() *corev1.Pod {
			p := terminated.DeepCopy()
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
			return p
		}(), errors: []want{forb("status.containerStatuses[0].state")}},
	})
}

func TestValidateBinding(t *testing.T) {
	runCreateCases(t, []createCase{
		{name: "valid", obj: &corev1.Binding{ObjectMeta: objectMeta("web"), Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}},
		{name: "target name required", obj: &corev1.Binding{ObjectMeta: objectMeta("web")}, errors: []want{req("target.name")}},
		{name: "target kind", obj: &corev1.Binding{ObjectMeta: objectMeta("web"), Target: corev1.ObjectReference{Kind: "Pod", Name: "x"}}, errors: []want{unsup("target.kind")}},
	})
}

func TestPodErrorMessage(t *testing.T) {
	p := podWith(func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" })
	errs := ValidateCreate(p)
	if got := errs.ToAggregate().Error(); got != "spec.containers[0].image: Required value" {
		t.Errorf("message = %q", got)
	}
}
