package validation

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	mirrorPodAnnotationKey = "kubernetes.io/config.mirror"
	podDeletionCostKey     = "controller.kubernetes.io/pod-deletion-cost"
)

// updatablePodSpecFields lists what a pod update may change, as printed by upstream.
const updatablePodSpecFields = "`spec.containers[*].image`," +
	"`spec.initContainers[*].image`," +
	"`spec.activeDeadlineSeconds`," +
	"`spec.tolerations` (only additions to existing tolerations)," +
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"

func validatePodCreate(pod *corev1.Pod) field.ErrorList {
	errs := validateMeta(&pod.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	errs = append(errs, validatePodBody(pod)...)
	specPath := field.NewPath("spec")
	if len(pod.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("ephemeralContainers"), "cannot be set on create"))
	}
	if pod.Spec.NodeName != "" && len(pod.Spec.SchedulingGates) != 0 {
		errs = append(errs, field.Forbidden(specPath.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	return errs
}

// validatePodBody validates everything of a pod but the generic metadata.
func validatePodBody(pod *corev1.Pod) field.ErrorList {
	metaPath := field.NewPath("metadata")
	specPath := field.NewPath("spec")
	errs := validatePodAnnotations(pod.Annotations, &pod.Spec, metaPath.Child("annotations"))
	errs = append(errs, validatePodSpec(&pod.Spec, pod.Name, specPath, true)...)
	if pod.Spec.ServiceAccountName == "" {
		for vi, vol := range pod.Spec.Volumes {
			if vol.Projected == nil {
				continue
			}
			for si, src := range vol.Projected.Sources {
				if src.ServiceAccountToken != nil {
					errs = append(errs, field.Forbidden(specPath.Child("volumes").Index(vi).Child("projected", "sources").Index(si).Child("serviceAccountToken"), "must not be specified when serviceAccountName is not set"))
				}
			}
		}
	}
	errs = append(errs, validateImageWhitespace(pod.Spec.Containers, specPath.Child("containers"))...)
	errs = append(errs, validateImageWhitespace(pod.Spec.InitContainers, specPath.Child("initContainers"))...)
	return errs
}

func validateImageWhitespace(containers []corev1.Container, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range containers {
		if len(c.Image) != len(strings.TrimSpace(c.Image)) {
			errs = append(errs, field.Invalid(fldPath.Index(i).Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
	}
	return errs
}

func validatePodAnnotations(annotations map[string]string, spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if value, ok := annotations[mirrorPodAnnotationKey]; ok && spec.NodeName == "" {
		errs = append(errs, field.Invalid(fldPath.Key(mirrorPodAnnotationKey), value, "must set spec.nodeName if mirror pod annotation is set"))
	}
	if value, ok := annotations[podDeletionCostKey]; ok {
		if _, err := strconv.ParseInt(value, 10, 32); err != nil {
			errs = append(errs, field.Invalid(fldPath.Key(podDeletionCostKey), value, "must be a 32bit integer"))
		}
	}
	return errs
}

func validatePodAnnotationUpdates(newPod, oldPod *corev1.Pod, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	oldVal, hadMirror := oldPod.Annotations[mirrorPodAnnotationKey]
	newVal, hasMirror := newPod.Annotations[mirrorPodAnnotationKey]
	switch {
	case hadMirror && (!hasMirror || newVal != oldVal):
		errs = append(errs, field.Forbidden(fldPath.Key(mirrorPodAnnotationKey), "may not remove or update mirror pod annotation"))
	case !hadMirror && hasMirror:
		errs = append(errs, field.Forbidden(fldPath.Key(mirrorPodAnnotationKey), "may not add mirror pod annotation"))
	}
	return errs
}

// validatePodTemplateSpec validates a pod template embedded in a workload.
func validatePodTemplateSpec(tmpl *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(tmpl.Labels, fldPath.Child("labels"))
	errs = append(errs, apimachineryvalidation.ValidateAnnotations(tmpl.Annotations, fldPath.Child("annotations"))...)
	errs = append(errs, validatePodAnnotations(tmpl.Annotations, &tmpl.Spec, fldPath.Child("annotations"))...)
	errs = append(errs, validatePodSpec(&tmpl.Spec, "", fldPath.Child("spec"), false)...)
	if len(tmpl.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("spec", "ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return errs
}

// validatePodSpec validates a pod spec. podName is empty for templates; isPod
// enables the rules that only apply to real pods.
func validatePodSpec(spec *corev1.PodSpec, podName string, fldPath *field.Path, isPod bool) field.ErrorList {
	var errs field.ErrorList
	if spec.TerminationGracePeriodSeconds == nil {
		errs = append(errs, field.Required(fldPath.Child("terminationGracePeriodSeconds"), ""))
	}
	gracePeriod := spec.TerminationGracePeriodSeconds
	hostUsers := spec.HostUsers == nil || *spec.HostUsers

	vols, volErrs := validateVolumes(spec.Volumes, podName, fldPath.Child("volumes"), isPod)
	errs = append(errs, volErrs...)
	podClaims, claimErrs := validatePodResourceClaims(spec.ResourceClaims, fldPath.Child("resourceClaims"))
	errs = append(errs, claimErrs...)
	errs = append(errs, validateContainers(spec.Containers, vols, podClaims, gracePeriod, fldPath.Child("containers"), spec.RestartPolicy, hostUsers)...)
	errs = append(errs, validateInitContainers(spec.InitContainers, spec.Containers, vols, podClaims, gracePeriod, fldPath.Child("initContainers"), spec.RestartPolicy, hostUsers)...)
	errs = append(errs, validateEphemeralContainers(spec, vols, podClaims, fldPath.Child("ephemeralContainers"), hostUsers)...)
	errs = append(errs, validatePodHostNetworkDeps(spec, fldPath, isPod)...)
	errs = append(errs, validateRestartPolicy(spec.RestartPolicy, fldPath.Child("restartPolicy"))...)
	errs = append(errs, validateDNSPolicy(spec.DNSPolicy, fldPath.Child("dnsPolicy"))...)
	errs = append(errs, metav1validation.ValidateLabels(spec.NodeSelector, fldPath.Child("nodeSelector"))...)
	errs = append(errs, validatePodSecurityContext(spec, fldPath.Child("securityContext"))...)
	errs = append(errs, validateAffinity(spec.Affinity, fldPath.Child("affinity"))...)
	errs = append(errs, validatePodDNSConfig(spec.DNSConfig, spec.DNSPolicy, fldPath.Child("dnsConfig"))...)
	for i, gate := range spec.ReadinessGates {
		errs = append(errs, validateQualifiedName(string(gate.ConditionType), fldPath.Child("readinessGates").Index(i).Child("conditionType"))...)
	}
	errs = append(errs, validateSchedulingGates(spec.SchedulingGates, fldPath.Child("schedulingGates"))...)
	errs = append(errs, validateTopologySpreadConstraints(spec.TopologySpreadConstraints, fldPath.Child("topologySpreadConstraints"))...)
	if !hostUsers {
		if spec.HostNetwork {
			errs = append(errs, field.Forbidden(fldPath.Child("hostNetwork"), "when `pod.Spec.HostUsers` is false"))
		}
		if spec.HostPID {
			errs = append(errs, field.Forbidden(fldPath.Child("HostPID"), "when `pod.Spec.HostUsers` is false"))
		}
		if spec.HostIPC {
			errs = append(errs, field.Forbidden(fldPath.Child("HostIPC"), "when `pod.Spec.HostUsers` is false"))
		}
	}
	if spec.ServiceAccountName != "" {
		errs = append(errs, validateName(apimachineryvalidation.ValidateServiceAccountName, spec.ServiceAccountName, fldPath.Child("serviceAccountName"))...)
	}
	if spec.NodeName != "" {
		errs = append(errs, validateName(apimachineryvalidation.NameIsDNSSubdomain, spec.NodeName, fldPath.Child("nodeName"))...)
	}
	if spec.ActiveDeadlineSeconds != nil {
		if v := *spec.ActiveDeadlineSeconds; v < 1 || v > math.MaxInt32 {
			errs = append(errs, field.Invalid(fldPath.Child("activeDeadlineSeconds"), v, validation.InclusiveRangeError(1, math.MaxInt32)))
		}
	}
	if spec.Hostname != "" {
		errs = append(errs, validateDNS1123Label(spec.Hostname, fldPath.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		errs = append(errs, validateDNS1123Label(spec.Subdomain, fldPath.Child("subdomain"))...)
	}
	errs = append(errs, validateTolerations(spec.Tolerations, fldPath.Child("tolerations"))...)
	for i, alias := range spec.HostAliases {
		errs = append(errs, validation.IsValidIP(fldPath.Child("hostAliases").Index(i).Child("ip"), alias.IP)...)
		for j, hostname := range alias.Hostnames {
			errs = append(errs, validateDNS1123Subdomain(hostname, fldPath.Child("hostAliases").Index(i).Child("hostnames").Index(j))...)
		}
	}
	if spec.PriorityClassName != "" {
		errs = append(errs, validateName(apimachineryvalidation.NameIsDNSSubdomain, spec.PriorityClassName, fldPath.Child("priorityClassName"))...)
	}
	if spec.RuntimeClassName != nil {
		errs = append(errs, validateName(apimachineryvalidation.NameIsDNSSubdomain, *spec.RuntimeClassName, fldPath.Child("runtimeClassName"))...)
	}
	if spec.PreemptionPolicy != nil {
		switch *spec.PreemptionPolicy {
		case corev1.PreemptLowerPriority, corev1.PreemptNever:
		case "":
			errs = append(errs, field.Required(fldPath.Child("preemptionPolicy"), ""))
		default:
			errs = append(errs, field.NotSupported(fldPath.Child("preemptionPolicy"), *spec.PreemptionPolicy, []corev1.PreemptionPolicy{corev1.PreemptLowerPriority, corev1.PreemptNever}))
		}
	}
	if spec.Overhead != nil {
		errs = append(errs, validateContainerResources(&corev1.ResourceRequirements{Limits: spec.Overhead}, nil, fldPath.Child("overhead"))...)
	}
	if spec.OS != nil {
		switch spec.OS.Name {
		case corev1.Linux, corev1.Windows:
		case "":
			errs = append(errs, field.Required(fldPath.Child("os", "name"), "cannot be empty"))
		default:
			errs = append(errs, field.NotSupported(fldPath.Child("os"), spec.OS.Name, []corev1.OSName{corev1.Linux, corev1.Windows}))
		}
	}
	return errs
}

func validatePodResourceClaims(claims []corev1.PodResourceClaim, fldPath *field.Path) (map[string]bool, field.ErrorList) {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, claim := range claims {
		idxPath := fldPath.Index(i)
		switch {
		case claim.Name == "":
			errs = append(errs, field.Required(idxPath.Child("name"), ""))
		case names[claim.Name]:
			errs = append(errs, field.Duplicate(idxPath.Child("name"), claim.Name))
		default:
			errs = append(errs, validateDNS1123Label(claim.Name, idxPath.Child("name"))...)
			names[claim.Name] = true
		}
		if claim.ResourceClaimName != nil && claim.ResourceClaimTemplateName != nil {
			errs = append(errs, field.Invalid(idxPath, claim, "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"))
		}
		if claim.ResourceClaimName == nil && claim.ResourceClaimTemplateName == nil {
			errs = append(errs, field.Invalid(idxPath, claim, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
		}
		if claim.ResourceClaimName != nil {
			errs = append(errs, validateName(apimachineryvalidation.NameIsDNSSubdomain, *claim.ResourceClaimName, idxPath.Child("resourceClaimName"))...)
		}
		if claim.ResourceClaimTemplateName != nil {
			errs = append(errs, validateName(apimachineryvalidation.NameIsDNSSubdomain, *claim.ResourceClaimTemplateName, idxPath.Child("resourceClaimTemplateName"))...)
		}
	}
	return names, errs
}

func validateRestartPolicy(policy corev1.RestartPolicy, fldPath *field.Path) field.ErrorList {
	switch policy {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	default:
		return field.ErrorList{field.NotSupported(fldPath, policy, []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever})}
	}
}

func validateDNSPolicy(policy corev1.DNSPolicy, fldPath *field.Path) field.ErrorList {
	switch policy {
	case corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone:
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	default:
		return field.ErrorList{field.NotSupported(fldPath, policy, []corev1.DNSPolicy{corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone})}
	}
}

const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

func validatePodDNSConfig(cfg *corev1.PodDNSConfig, policy corev1.DNSPolicy, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if policy == corev1.DNSNone {
		if cfg == nil {
			return field.ErrorList{field.Required(fldPath, fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", corev1.DNSNone))}
		}
		if len(cfg.Nameservers) == 0 {
			return field.ErrorList{field.Required(fldPath.Child("nameservers"), fmt.Sprintf("must provide at least one DNS nameserver when `dnsPolicy` is %s", corev1.DNSNone))}
		}
	}
	if cfg == nil {
		return nil
	}
	if len(cfg.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.Invalid(fldPath.Child("nameservers"), cfg.Nameservers, fmt.Sprintf("must not have more than %v nameservers", maxDNSNameservers)))
	}
	for i, ns := range cfg.Nameservers {
		errs = append(errs, validation.IsValidIP(fldPath.Child("nameservers").Index(i), ns)...)
	}
	if len(cfg.Searches) > maxDNSSearchPaths {
		errs = append(errs, field.Invalid(fldPath.Child("searches"), cfg.Searches, fmt.Sprintf("must not have more than %v search paths", maxDNSSearchPaths)))
	}
	if len(strings.Join(cfg.Searches, " ")) > maxDNSSearchListChars {
		errs = append(errs, field.Invalid(fldPath.Child("searches"), cfg.Searches, fmt.Sprintf("must not have more than %v characters (including spaces) in the search list", maxDNSSearchListChars)))
	}
	for i, search := range cfg.Searches {
		if search == "." {
			continue
		}
		search = strings.TrimSuffix(search, ".")
		for _, msg := range validation.IsDNS1123SubdomainWithUnderscore(search) {
			errs = append(errs, field.Invalid(fldPath.Child("searches").Index(i), search, msg))
		}
	}
	for i, opt := range cfg.Options {
		if opt.Name == "" {
			errs = append(errs, field.Required(fldPath.Child("options").Index(i), "must not be empty"))
		}
	}
	return errs
}

func validateSchedulingGates(gates []corev1.PodSchedulingGate, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, gate := range gates {
		errs = append(errs, validateQualifiedName(gate.Name, fldPath.Index(i))...)
		if seen[gate.Name] {
			errs = append(errs, field.Duplicate(fldPath.Index(i), gate.Name))
		}
		seen[gate.Name] = true
	}
	return errs
}

func validatePodHostNetworkDeps(spec *corev1.PodSpec, fldPath *field.Path, isPod bool) field.ErrorList {
	var errs field.ErrorList
	if !spec.HostNetwork {
		return nil
	}
	for i, c := range spec.Containers {
		for j, port := range c.Ports {
			if hp, cp := port.HostPort, port.ContainerPort; (isPod || hp != 0) && hp != cp {
				errs = append(errs, field.Invalid(fldPath.Child("containers").Index(i).Child("ports").Index(j).Child("hostPort"), port.HostPort, "must match `containerPort` when `hostNetwork` is true"))
			}
		}
	}
	return errs
}

func validateSeccompProfile(sp *corev1.SeccompProfile, fldPath *field.Path) field.ErrorList {
	if sp == nil {
		return nil
	}
	var errs field.ErrorList
	switch sp.Type {
	case corev1.SeccompProfileTypeLocalhost:
		if sp.LocalhostProfile == nil || *sp.LocalhostProfile == "" {
			errs = append(errs, field.Required(fldPath.Child("localhostProfile"), "must be set when seccomp type is Localhost"))
		}
	case corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined:
		if sp.LocalhostProfile != nil {
			errs = append(errs, field.Invalid(fldPath.Child("localhostProfile"), sp, "can only be set when seccomp type is Localhost"))
		}
	case "":
		errs = append(errs, field.Required(fldPath.Child("type"), "type is required when seccompProfile is set"))
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("type"), sp.Type, []corev1.SeccompProfileType{corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined}))
	}
	return errs
}

func validateAppArmorProfile(p *corev1.AppArmorProfile, fldPath *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	switch p.Type {
	case corev1.AppArmorProfileTypeLocalhost:
		if p.LocalhostProfile == nil || strings.TrimSpace(*p.LocalhostProfile) == "" {
			errs = append(errs, field.Required(fldPath.Child("localhostProfile"), "must be set when AppArmor type is Localhost"))
		} else if strings.TrimSpace(*p.LocalhostProfile) != *p.LocalhostProfile {
			errs = append(errs, field.Invalid(fldPath.Child("localhostProfile"), *p.LocalhostProfile, "must not be padded with whitespace"))
		}
	case corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeUnconfined:
		if p.LocalhostProfile != nil {
			errs = append(errs, field.Invalid(fldPath.Child("localhostProfile"), p.LocalhostProfile, "can only be set when AppArmor type is Localhost"))
		}
	case "":
		errs = append(errs, field.Required(fldPath.Child("type"), "type is required when appArmorProfile is set"))
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("type"), p.Type, []corev1.AppArmorProfileType{corev1.AppArmorProfileTypeLocalhost, corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeUnconfined}))
	}
	return errs
}

func validatePodSecurityContext(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	sc := spec.SecurityContext
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
	if sc.FSGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.FSGroup) {
			errs = append(errs, field.Invalid(fldPath.Child("fsGroup"), *sc.FSGroup, msg))
		}
	}
	if sc.RunAsUser != nil {
		for _, msg := range validation.IsValidUserID(*sc.RunAsUser) {
			errs = append(errs, field.Invalid(fldPath.Child("runAsUser"), *sc.RunAsUser, msg))
		}
	}
	if sc.RunAsGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.RunAsGroup) {
			errs = append(errs, field.Invalid(fldPath.Child("runAsGroup"), *sc.RunAsGroup, msg))
		}
	}
	for i, gid := range sc.SupplementalGroups {
		for _, msg := range validation.IsValidGroupID(gid) {
			errs = append(errs, field.Invalid(fldPath.Child("supplementalGroups").Index(i), gid, msg))
		}
	}
	if spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace && spec.HostPID {
		errs = append(errs, field.Invalid(fldPath.Child("shareProcessNamespace"), *spec.ShareProcessNamespace, "ShareProcessNamespace and HostPID cannot both be enabled"))
	}
	names := map[string]bool{}
	for i, s := range sc.Sysctls {
		namePath := fldPath.Child("sysctls").Index(i).Child("name")
		switch {
		case s.Name == "":
			errs = append(errs, field.Required(namePath, ""))
		case !isValidSysctlName(s.Name):
			errs = append(errs, field.Invalid(namePath, s.Name, fmt.Sprintf("must have at most %d characters and match regex %s", sysctlMaxLength, sysctlRegexpString)))
		case names[s.Name]:
			errs = append(errs, field.Duplicate(namePath, s.Name))
		}
		names[s.Name] = true
	}
	if sc.FSGroupChangePolicy != nil {
		switch *sc.FSGroupChangePolicy {
		case corev1.FSGroupChangeAlways, corev1.FSGroupChangeOnRootMismatch:
		default:
			errs = append(errs, field.NotSupported(fldPath.Child("fsGroupChangePolicy"), sc.FSGroupChangePolicy, []corev1.PodFSGroupChangePolicy{corev1.FSGroupChangeAlways, corev1.FSGroupChangeOnRootMismatch}))
		}
	}
	errs = append(errs, validateSeccompProfile(sc.SeccompProfile, fldPath.Child("seccompProfile"))...)
	errs = append(errs, validateAppArmorProfile(sc.AppArmorProfile, fldPath.Child("appArmorProfile"))...)
	if sc.SupplementalGroupsPolicy != nil {
		switch *sc.SupplementalGroupsPolicy {
		case corev1.SupplementalGroupsPolicyMerge, corev1.SupplementalGroupsPolicyStrict:
		default:
			errs = append(errs, field.NotSupported(fldPath.Child("supplementalGroupsPolicy"), sc.SupplementalGroupsPolicy, []corev1.SupplementalGroupsPolicy{corev1.SupplementalGroupsPolicyMerge, corev1.SupplementalGroupsPolicyStrict}))
		}
	}
	if sc.SELinuxChangePolicy != nil {
		switch *sc.SELinuxChangePolicy {
		case corev1.SELinuxChangePolicyMountOption, corev1.SELinuxChangePolicyRecursive:
		default:
			errs = append(errs, field.NotSupported(fldPath.Child("seLinuxChangePolicy"), *sc.SELinuxChangePolicy, []corev1.PodSELinuxChangePolicy{corev1.SELinuxChangePolicyMountOption, corev1.SELinuxChangePolicyRecursive}))
		}
	}
	return errs
}

const (
	sysctlSegmentFmt   = "[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
	sysctlRegexpString = "^(" + sysctlSegmentFmt + "[\\./])*" + sysctlSegmentFmt + "$"
	sysctlMaxLength    = 253
)

func isValidSysctlName(name string) bool {
	if len(name) > sysctlMaxLength {
		return false
	}
	return regexp.MustCompile(sysctlRegexpString).MatchString(name)
}

func validateTaintEffect(effect corev1.TaintEffect, allowEmpty bool, fldPath *field.Path) field.ErrorList {
	if !allowEmpty && effect == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	switch effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return nil
	default:
		return field.ErrorList{field.NotSupported(fldPath, effect, []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute})}
	}
}

func validateTolerations(tolerations []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tolerations {
		idxPath := fldPath.Index(i)
		if t.Key != "" {
			errs = append(errs, metav1validation.ValidateLabelName(t.Key, idxPath.Child("key"))...)
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(idxPath.Child("operator"), t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(idxPath.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if msgs := validation.IsValidLabelValue(t.Value); len(msgs) != 0 {
				errs = append(errs, field.Invalid(idxPath.Child("operator"), t.Value, strings.Join(msgs, ";")))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(idxPath.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(idxPath.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		if t.Effect != "" {
			errs = append(errs, validateTaintEffect(t.Effect, true, idxPath.Child("effect"))...)
		}
	}
	return errs
}

// validateOnlyAddedTolerations allows an update to add tolerations and to change
// tolerationSeconds of existing ones, nothing else.
func validateOnlyAddedTolerations(newTolerations, oldTolerations []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	for _, old := range oldTolerations {
		found := false
		for _, t := range newTolerations {
			candidate := old
			candidate.TolerationSeconds = t.TolerationSeconds
			if apiequality.Semantic.DeepEqual(candidate, t) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(fldPath, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return validateTolerations(newTolerations, fldPath)
}

func validateOnlyDeletedSchedulingGates(newGates, oldGates []corev1.PodSchedulingGate, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	old := map[string]bool{}
	for _, g := range oldGates {
		old[g.Name] = true
	}
	for i, g := range newGates {
		if !old[g.Name] {
			errs = append(errs, field.Forbidden(fldPath.Index(i).Child("name"), fmt.Sprintf("only deletion is allowed, but found new scheduling gate '%s'", g.Name)))
		}
	}
	return errs
}

func validateContainerUpdates(newContainers, oldContainers []corev1.Container, fldPath *field.Path) (field.ErrorList, bool) {
	if len(newContainers) != len(oldContainers) {
		return field.ErrorList{field.Forbidden(fldPath, "pod updates may not add or remove containers")}, true
	}
	var errs field.ErrorList
	for i, c := range newContainers {
		if c.Image == "" {
			errs = append(errs, field.Required(fldPath.Index(i).Child("image"), ""))
		}
	}
	return errs, false
}

func validatePodUpdate(pod, old *corev1.Pod) field.ErrorList {
	metaPath := field.NewPath("metadata")
	specPath := field.NewPath("spec")
	errs := validateMetaUpdate(&pod.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validatePodBody(pod)...)
	errs = append(errs, validatePodAnnotationUpdates(pod, old, metaPath.Child("annotations"))...)

	cErrs, stop := validateContainerUpdates(pod.Spec.Containers, old.Spec.Containers, specPath.Child("containers"))
	errs = append(errs, cErrs...)
	if stop {
		return errs
	}
	cErrs, stop = validateContainerUpdates(pod.Spec.InitContainers, old.Spec.InitContainers, specPath.Child("initContainers"))
	errs = append(errs, cErrs...)
	if stop {
		return errs
	}

	// activeDeadlineSeconds may be set from nil, or lowered.
	if pod.Spec.ActiveDeadlineSeconds != nil {
		v := *pod.Spec.ActiveDeadlineSeconds
		if v < 0 || v > math.MaxInt32 {
			return append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), v, validation.InclusiveRangeError(0, math.MaxInt32)))
		}
		if old.Spec.ActiveDeadlineSeconds != nil && *old.Spec.ActiveDeadlineSeconds < v {
			return append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), v, "must be less than or equal to previous value"))
		}
	} else if old.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), pod.Spec.ActiveDeadlineSeconds, "must not update from a positive integer to nil value"))
	}

	errs = append(errs, validateOnlyAddedTolerations(pod.Spec.Tolerations, old.Spec.Tolerations, specPath.Child("tolerations"))...)
	errs = append(errs, validateOnlyDeletedSchedulingGates(pod.Spec.SchedulingGates, old.Spec.SchedulingGates, specPath.Child("schedulingGates"))...)

	if apiequality.Semantic.DeepEqual(pod.Spec, old.Spec) {
		return errs
	}
	// Replace the updatable fields with the old values; whatever differs
	// afterwards is a forbidden change.
	munged := *pod.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = old.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = old.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = nil
	if old.Spec.ActiveDeadlineSeconds != nil {
		v := *old.Spec.ActiveDeadlineSeconds
		munged.ActiveDeadlineSeconds = &v
	}
	munged.SchedulingGates = old.Spec.SchedulingGates
	munged.Tolerations = old.Spec.Tolerations
	if old.Spec.TerminationGracePeriodSeconds != nil && *old.Spec.TerminationGracePeriodSeconds < 0 &&
		munged.TerminationGracePeriodSeconds != nil && *munged.TerminationGracePeriodSeconds == 1 {
		munged.TerminationGracePeriodSeconds = old.Spec.TerminationGracePeriodSeconds
	}
	if len(old.Spec.SchedulingGates) > 0 {
		// Gated pods may gain node selectors (no deletions or mutations).
		if !apiequality.Semantic.DeepEqual(munged.NodeSelector, old.Spec.NodeSelector) {
			for k, v := range old.Spec.NodeSelector {
				if nv, ok := munged.NodeSelector[k]; !ok || nv != v {
					errs = append(errs, field.Invalid(specPath.Child("nodeSelector"), munged.NodeSelector, "only additions to spec.nodeSelector are allowed (no mutations or deletions)"))
					break
				}
			}
			munged.NodeSelector = old.Spec.NodeSelector
		}
	}
	if !apiequality.Semantic.DeepEqual(munged, old.Spec) {
		specDiff := diff.Diff(old.Spec, munged)
		errs = append(errs, field.Forbidden(specPath, fmt.Sprintf("pod updates may not change fields other than %s\n%v", updatablePodSpecFields, specDiff)))
	}
	return errs
}

func validatePodStatusUpdate(pod, old *corev1.Pod) field.ErrorList {
	metaPath := field.NewPath("metadata")
	errs := validateMetaUpdate(&pod.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validatePodAnnotationUpdates(pod, old, metaPath.Child("annotations"))...)
	errs = append(errs, validatePodAnnotations(pod.Annotations, &pod.Spec, metaPath.Child("annotations"))...)

	statusPath := field.NewPath("status")
	for i, cond := range pod.Status.Conditions {
		switch cond.Type {
		case corev1.PodScheduled, corev1.PodReady, corev1.PodInitialized:
			continue
		}
		errs = append(errs, validateQualifiedName(string(cond.Type), statusPath.Child("conditions").Index(i).Child("Type"))...)
	}
	if pod.Spec.NodeName != old.Spec.NodeName {
		errs = append(errs, field.Forbidden(statusPath.Child("nodeName"), "may not be changed directly"))
	}
	if pod.Status.NominatedNodeName != old.Status.NominatedNodeName && pod.Status.NominatedNodeName != "" {
		errs = append(errs, validateName(apimachineryvalidation.NameIsDNSSubdomain, pod.Status.NominatedNodeName, statusPath.Child("nominatedNodeName"))...)
	}
	errs = append(errs, validateImmutable(pod.Status.QOSClass, old.Status.QOSClass, statusPath.Child("qosClass"))...)
	errs = append(errs, validateContainerStateTransition(pod.Status.ContainerStatuses, old.Status.ContainerStatuses, statusPath.Child("containerStatuses"), old.Spec.RestartPolicy, nil)...)
	errs = append(errs, validateContainerStateTransition(pod.Status.InitContainerStatuses, old.Status.InitContainerStatuses, statusPath.Child("initContainerStatuses"), old.Spec.RestartPolicy, old.Spec.InitContainers)...)
	errs = append(errs, validateContainerStateTransition(pod.Status.EphemeralContainerStatuses, old.Status.EphemeralContainerStatuses, statusPath.Child("ephemeralContainerStatuses"), corev1.RestartPolicyNever, nil)...)

	var oldPodIPs, oldHostIPs []string
	for _, ip := range old.Status.PodIPs {
		oldPodIPs = append(oldPodIPs, ip.IP)
	}
	for _, ip := range old.Status.HostIPs {
		oldHostIPs = append(oldHostIPs, ip.IP)
	}
	podIPs := make([]string, 0, len(pod.Status.PodIPs))
	for _, ip := range pod.Status.PodIPs {
		podIPs = append(podIPs, ip.IP)
	}
	errs = append(errs, validateIPList(podIPs, statusPath.Child("podIPs"), oldPodIPs, true)...)
	if len(pod.Status.HostIPs) > 0 {
		hostIPs := make([]string, 0, len(pod.Status.HostIPs))
		for _, ip := range pod.Status.HostIPs {
			hostIPs = append(hostIPs, ip.IP)
		}
		if pod.Status.HostIP != hostIPs[0] {
			errs = append(errs, field.Invalid(statusPath.Child("hostIPs").Index(0).Child("ip"), hostIPs[0], "must be equal to `hostIP`"))
		}
		errs = append(errs, validateIPList(hostIPs, statusPath.Child("hostIPs"), oldHostIPs, true)...)
	}
	return errs
}

// validateIPList validates a list of IPs where at most one IP per family is
// allowed (pod IPs, host IPs). Elements of a list are reported as <path>[i]
// (or <path>[i].ip when ipChild is set).
func validateIPList(ips []string, fldPath *field.Path, oldIPs []string, ipChild bool) field.ErrorList {
	var errs field.ErrorList
	valid := true
	for i, ip := range ips {
		p := fldPath.Index(i)
		if ipChild {
			p = p.Child("ip")
		}
		e := validation.IsValidIPForLegacyField(p, ip, true, oldIPs)
		if len(e) > 0 {
			valid = false
		}
		errs = append(errs, e...)
	}
	if len(ips) > 1 && valid {
		if len(ips) > 2 || !isDualStack(ips[0], ips[1]) {
			errs = append(errs, field.Invalid(fldPath, ips, "may specify no more than one IP for each IP family"))
		}
		seen := map[string]bool{}
		for i, ip := range ips {
			if seen[ip] {
				errs = append(errs, field.Duplicate(fldPath.Index(i), ip))
			}
			seen[ip] = true
		}
	}
	return errs
}

func isRestartableInitContainer(c *corev1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// validateContainerStateTransition rejects terminated containers becoming
// non-terminated when the restart policy does not allow restarts.
func validateContainerStateTransition(newStatuses, oldStatuses []corev1.ContainerStatus, fldPath *field.Path, policy corev1.RestartPolicy, initContainers []corev1.Container) field.ErrorList {
	var errs field.ErrorList
	if policy == corev1.RestartPolicyAlways {
		return nil
	}
	for i, oldStatus := range oldStatuses {
		if oldStatus.State.Terminated == nil {
			continue
		}
		if oldStatus.State.Terminated.ExitCode != 0 && policy == corev1.RestartPolicyOnFailure {
			continue
		}
		restartable := false
		for j := range initContainers {
			if initContainers[j].Name == oldStatus.Name {
				restartable = isRestartableInitContainer(&initContainers[j])
				break
			}
		}
		if restartable {
			continue
		}
		for _, newStatus := range newStatuses {
			if oldStatus.Name == newStatus.Name && newStatus.State.Terminated == nil {
				errs = append(errs, field.Forbidden(fldPath.Index(i).Child("state"), "may not be transitioned to non-terminated state"))
			}
		}
	}
	return errs
}

// validateBinding validates a pod binding (pods/binding).
func validateBinding(b *corev1.Binding) field.ErrorList {
	var errs field.ErrorList
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		errs = append(errs, field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node", "<empty>"}))
	}
	if b.Target.Name == "" {
		errs = append(errs, field.Required(field.NewPath("target", "name"), ""))
	}
	return errs
}
