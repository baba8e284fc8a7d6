package validation

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func supportedPortProtocols() []corev1.Protocol {
	return []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}
}

func isSupportedPortProtocol(p corev1.Protocol) bool {
	return p == corev1.ProtocolTCP || p == corev1.ProtocolUDP || p == corev1.ProtocolSCTP
}

// validateContainers validates the regular containers of a pod spec.
func validateContainers(containers []corev1.Container, vols map[string]corev1.VolumeSource, podClaims map[string]bool, gracePeriod *int64, fldPath *field.Path, podRestartPolicy corev1.RestartPolicy, hostUsers bool) field.ErrorList {
	if len(containers) == 0 {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	names := map[string]bool{}
	for i := range containers {
		c := &containers[i]
		idxPath := fldPath.Index(i)
		errs = append(errs, validateContainerCommon(c, vols, podClaims, idxPath, podRestartPolicy, hostUsers)...)
		if names[c.Name] {
			errs = append(errs, field.Duplicate(idxPath.Child("name"), c.Name))
		} else {
			names[c.Name] = true
		}
		if c.Lifecycle != nil {
			errs = append(errs, validateLifecycle(c.Lifecycle, gracePeriod, idxPath.Child("lifecycle"))...)
		}
		errs = append(errs, validateLivenessProbe(c.LivenessProbe, gracePeriod, idxPath.Child("livenessProbe"))...)
		errs = append(errs, validateReadinessProbe(c.ReadinessProbe, gracePeriod, idxPath.Child("readinessProbe"))...)
		errs = append(errs, validateStartupProbe(c.StartupProbe, gracePeriod, idxPath.Child("startupProbe"))...)
		errs = append(errs, validateContainerRestartPolicy(c.RestartPolicy, idxPath.Child("restartPolicy"))...)
	}
	errs = append(errs, checkHostPortConflicts(containers, fldPath)...)
	return errs
}

// validateContainerRestartPolicy validates a container-level restartPolicy.
func validateContainerRestartPolicy(policy *corev1.ContainerRestartPolicy, fldPath *field.Path) field.ErrorList {
	if policy == nil {
		return nil
	}
	switch *policy {
	case corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyNever:
		return nil
	default:
		return field.ErrorList{field.NotSupported(fldPath, *policy, []corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyNever})}
	}
}

// validateInitContainers validates the init containers of a pod spec.
func validateInitContainers(containers, regular []corev1.Container, vols map[string]corev1.VolumeSource, podClaims map[string]bool, gracePeriod *int64, fldPath *field.Path, podRestartPolicy corev1.RestartPolicy, hostUsers bool) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for _, c := range regular {
		names[c.Name] = true
	}
	for i := range containers {
		c := &containers[i]
		idxPath := fldPath.Index(i)
		errs = append(errs, validateContainerCommon(c, vols, podClaims, idxPath, podRestartPolicy, hostUsers)...)
		errs = append(errs, validateContainerRestartPolicy(c.RestartPolicy, idxPath.Child("restartPolicy"))...)
		if names[c.Name] {
			errs = append(errs, field.Duplicate(idxPath.Child("name"), c.Name))
		} else if c.Name != "" {
			names[c.Name] = true
		}
		errs = append(errs, checkHostPortConflicts([]corev1.Container{*c}, fldPath)...)
		if isRestartableInitContainer(c) {
			if c.Lifecycle != nil {
				errs = append(errs, validateLifecycle(c.Lifecycle, gracePeriod, idxPath.Child("lifecycle"))...)
			}
			errs = append(errs, validateLivenessProbe(c.LivenessProbe, gracePeriod, idxPath.Child("livenessProbe"))...)
			errs = append(errs, validateReadinessProbe(c.ReadinessProbe, gracePeriod, idxPath.Child("readinessProbe"))...)
			errs = append(errs, validateStartupProbe(c.StartupProbe, gracePeriod, idxPath.Child("startupProbe"))...)
			continue
		}
		const msg = "may not be set for init containers without restartPolicy=Always"
		if c.Lifecycle != nil {
			errs = append(errs, field.Forbidden(idxPath.Child("lifecycle"), msg))
		}
		if c.LivenessProbe != nil {
			errs = append(errs, field.Forbidden(idxPath.Child("livenessProbe"), msg))
		}
		if c.ReadinessProbe != nil {
			errs = append(errs, field.Forbidden(idxPath.Child("readinessProbe"), msg))
		}
		if c.StartupProbe != nil {
			errs = append(errs, field.Forbidden(idxPath.Child("startupProbe"), msg))
		}
	}
	return errs
}

// validateEphemeralContainers validates ephemeral containers (set through the
// ephemeralcontainers subresource; forbidden on create and in templates).
func validateEphemeralContainers(spec *corev1.PodSpec, vols map[string]corev1.VolumeSource, podClaims map[string]bool, fldPath *field.Path, hostUsers bool) field.ErrorList {
	var errs field.ErrorList
	if len(spec.EphemeralContainers) == 0 {
		return nil
	}
	others, all := map[string]bool{}, map[string]bool{}
	for _, c := range spec.Containers {
		others[c.Name], all[c.Name] = true, true
	}
	for _, c := range spec.InitContainers {
		others[c.Name], all[c.Name] = true, true
	}
	for i := range spec.EphemeralContainers {
		ec := &spec.EphemeralContainers[i]
		idxPath := fldPath.Index(i)
		c := (*corev1.Container)(&ec.EphemeralContainerCommon)
		errs = append(errs, validateContainerCommon(c, vols, podClaims, idxPath, spec.RestartPolicy, hostUsers)...)
		if all[ec.Name] {
			errs = append(errs, field.Duplicate(idxPath.Child("name"), ec.Name))
		} else {
			all[ec.Name] = true
		}
		if ec.TargetContainerName != "" && !others[ec.TargetContainerName] {
			errs = append(errs, field.NotFound(idxPath.Child("targetContainerName"), ec.TargetContainerName))
		}
		const msg = "cannot be set for an Ephemeral Container"
		if len(ec.Ports) > 0 {
			errs = append(errs, field.Forbidden(idxPath.Child("ports"), msg))
		}
		if len(ec.Resources.Limits)+len(ec.Resources.Requests)+len(ec.Resources.Claims) > 0 {
			errs = append(errs, field.Forbidden(idxPath.Child("resources"), msg))
		}
		if ec.LivenessProbe != nil {
			errs = append(errs, field.Forbidden(idxPath.Child("livenessProbe"), msg))
		}
		if ec.ReadinessProbe != nil {
			errs = append(errs, field.Forbidden(idxPath.Child("readinessProbe"), msg))
		}
		if ec.StartupProbe != nil {
			errs = append(errs, field.Forbidden(idxPath.Child("startupProbe"), msg))
		}
		if ec.Lifecycle != nil {
			errs = append(errs, field.Forbidden(idxPath.Child("lifecycle"), msg))
		}
		for j, vm := range ec.VolumeMounts {
			if vm.SubPath != "" {
				errs = append(errs, field.Forbidden(idxPath.Child("volumeMounts").Index(j).Child("subPath"), msg))
			}
			if vm.SubPathExpr != "" {
				errs = append(errs, field.Forbidden(idxPath.Child("volumeMounts").Index(j).Child("subPathExpr"), msg))
			}
		}
	}
	return errs
}

// validateContainerCommon applies the rules shared by all container types.
func validateContainerCommon(c *corev1.Container, vols map[string]corev1.VolumeSource, podClaims map[string]bool, fldPath *field.Path, podRestartPolicy corev1.RestartPolicy, hostUsers bool) field.ErrorList {
	var errs field.ErrorList
	namePath := fldPath.Child("name")
	if c.Name == "" {
		errs = append(errs, field.Required(namePath, ""))
	} else {
		errs = append(errs, validateDNS1123Label(c.Name, namePath)...)
	}
	if c.Image == "" {
		errs = append(errs, field.Required(fldPath.Child("image"), ""))
	}
	switch c.TerminationMessagePolicy {
	case corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
	case "":
		errs = append(errs, field.Required(fldPath.Child("terminationMessagePolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, []corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}))
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	devices := map[string]string{}
	for _, d := range c.VolumeDevices {
		devices[d.Name] = d.DevicePath
	}
	errs = append(errs, validateContainerPorts(c.Ports, fldPath.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, fldPath.Child("env"))...)
	errs = append(errs, validateEnvFrom(c.EnvFrom, fldPath.Child("envFrom"))...)
	errs = append(errs, validateVolumeMounts(c.VolumeMounts, devices, vols, c, fldPath.Child("volumeMounts"))...)
	errs = append(errs, validateVolumeDevices(c.VolumeDevices, mounts, vols, fldPath.Child("volumeDevices"))...)
	errs = append(errs, validatePullPolicy(c.ImagePullPolicy, fldPath.Child("imagePullPolicy"))...)
	errs = append(errs, validateContainerResources(&c.Resources, podClaims, fldPath.Child("resources"))...)
	errs = append(errs, validateResizePolicy(c.ResizePolicy, fldPath.Child("resizePolicy"), podRestartPolicy)...)
	errs = append(errs, validateSecurityContext(c.SecurityContext, fldPath.Child("securityContext"), hostUsers)...)
	return errs
}

func validateContainerPorts(ports []corev1.ContainerPort, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, port := range ports {
		idxPath := fldPath.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) != 0 {
				for _, msg := range msgs {
					errs = append(errs, field.Invalid(idxPath.Child("name"), port.Name, msg))
				}
			} else if names[port.Name] {
				errs = append(errs, field.Duplicate(idxPath.Child("name"), port.Name))
			} else {
				names[port.Name] = true
			}
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(idxPath.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				errs = append(errs, field.Invalid(idxPath.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(idxPath.Child("hostPort"), port.HostPort, msg))
			}
		}
		if port.Protocol == "" {
			errs = append(errs, field.Required(idxPath.Child("protocol"), ""))
		} else if !isSupportedPortProtocol(port.Protocol) {
			errs = append(errs, field.NotSupported(idxPath.Child("protocol"), port.Protocol, supportedPortProtocols()))
		}
	}
	return errs
}

// checkHostPortConflicts rejects two ports binding the same protocol/hostIP/hostPort.
func checkHostPortConflicts(containers []corev1.Container, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for ci, c := range containers {
		for pi, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
			if seen[key] {
				errs = append(errs, field.Duplicate(fldPath.Index(ci).Child("ports").Index(pi).Child("hostPort"), key))
			} else {
				seen[key] = true
			}
		}
	}
	return errs
}

func validateEnvVarName(name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsRelaxedEnvVarName(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

func validateEnv(vars []corev1.EnvVar, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range vars {
		idxPath := fldPath.Index(i)
		if ev.Name == "" {
			errs = append(errs, field.Required(idxPath.Child("name"), ""))
		} else {
			errs = append(errs, validateEnvVarName(ev.Name, idxPath.Child("name"))...)
		}
		errs = append(errs, validateEnvVarValueFrom(ev, idxPath.Child("valueFrom"))...)
	}
	return errs
}

func validEnvFieldPaths() []string {
	return []string{"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"}
}

func validVolumeFieldPaths() []string {
	return []string{"metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid"}
}

func validResourceFieldPaths() []string {
	return []string{"limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu", "requests.ephemeral-storage", "requests.memory"}
}

func validateEnvVarValueFrom(ev corev1.EnvVar, fldPath *field.Path) field.ErrorList {
	if ev.ValueFrom == nil {
		return nil
	}
	var errs field.ErrorList
	n := 0
	if ev.ValueFrom.FieldRef != nil {
		n++
		errs = append(errs, validateObjectFieldSelector(ev.ValueFrom.FieldRef, validEnvFieldPaths(), fldPath.Child("fieldRef"))...)
	}
	if ev.ValueFrom.ResourceFieldRef != nil {
		n++
		errs = append(errs, validateResourceFieldSelector(ev.ValueFrom.ResourceFieldRef, false, fldPath.Child("resourceFieldRef"))...)
	}
	if ev.ValueFrom.ConfigMapKeyRef != nil {
		n++
		errs = append(errs, validateKeySelector(ev.ValueFrom.ConfigMapKeyRef.Name, ev.ValueFrom.ConfigMapKeyRef.Key, fldPath.Child("configMapKeyRef"))...)
	}
	if ev.ValueFrom.SecretKeyRef != nil {
		n++
		errs = append(errs, validateKeySelector(ev.ValueFrom.SecretKeyRef.Name, ev.ValueFrom.SecretKeyRef.Key, fldPath.Child("secretKeyRef"))...)
	}
	if ev.ValueFrom.FileKeyRef != nil {
		n++
		ref := ev.ValueFrom.FileKeyRef
		refPath := fldPath.Child("fileKeyRef")
		if ref.VolumeName == "" {
			errs = append(errs, field.Required(refPath.Child("volumeName"), ""))
		}
		if ref.Path == "" {
			errs = append(errs, field.Required(refPath.Child("path"), ""))
		} else {
			errs = append(errs, validateLocalNonReservedPath(ref.Path, refPath.Child("path"))...)
		}
		if ref.Key == "" {
			errs = append(errs, field.Required(refPath.Child("key"), ""))
		} else {
			errs = append(errs, validateEnvVarName(ref.Key, refPath.Child("key"))...)
		}
	}
	switch {
	case n == 0:
		errs = append(errs, field.Invalid(fldPath, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case ev.Value != "":
		errs = append(errs, field.Invalid(fldPath, "", "may not be specified when `value` is not empty"))
	case n > 1:
		errs = append(errs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
	}
	return errs
}

// splitSubscriptedPath splits "metadata.labels['key']" into its path and key.
func splitSubscriptedPath(fieldPath string) (string, string, bool) {
	if !strings.HasSuffix(fieldPath, "']") {
		return "", "", false
	}
	s := strings.TrimSuffix(fieldPath, "']")
	parts := strings.SplitN(s, "['", 2)
	if len(parts) < 2 || len(parts[0]) == 0 {
		return "", "", false
	}
	return parts[0], parts[1], true
}

func validateObjectFieldSelector(fs *corev1.ObjectFieldSelector, valid []string, fldPath *field.Path) field.ErrorList {
	if fs.APIVersion == "" {
		return field.ErrorList{field.Required(fldPath.Child("apiVersion"), "")}
	}
	if fs.FieldPath == "" {
		return field.ErrorList{field.Required(fldPath.Child("fieldPath"), "")}
	}
	if fs.APIVersion != "v1" {
		return field.ErrorList{field.Invalid(fldPath.Child("fieldPath"), fs.FieldPath, fmt.Sprintf("error converting fieldPath: unsupported pod version: %s", fs.APIVersion))}
	}
	if p, subscript, ok := splitSubscriptedPath(fs.FieldPath); ok {
		switch p {
		case "metadata.annotations":
			return validateQualifiedName(strings.ToLower(subscript), fldPath)
		case "metadata.labels":
			return validateQualifiedName(subscript, fldPath)
		default:
			return field.ErrorList{field.Invalid(fldPath, p, "does not support subscript")}
		}
	}
	for _, v := range valid {
		if v == fs.FieldPath {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(fldPath.Child("fieldPath"), fs.FieldPath, valid)}
}

func validateResourceFieldSelector(fs *corev1.ResourceFieldSelector, volume bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case volume && fs.ContainerName == "":
		errs = append(errs, field.Required(fldPath.Child("containerName"), ""))
	case fs.Resource == "":
		errs = append(errs, field.Required(fldPath.Child("resource"), ""))
	default:
		ok := strings.HasPrefix(fs.Resource, "requests.hugepages-") || strings.HasPrefix(fs.Resource, "limits.hugepages-")
		for _, v := range validResourceFieldPaths() {
			if v == fs.Resource {
				ok = true
			}
		}
		if !ok {
			errs = append(errs, field.NotSupported(fldPath.Child("resource"), fs.Resource, validResourceFieldPaths()))
		}
	}
	if fs.Divisor.IsZero() {
		return errs
	}
	divisor := fs.Divisor.String()
	memoryDivisors := "1 1k 1M 1G 1T 1P 1E 1Ki 1Mi 1Gi 1Ti 1Pi 1Ei"
	inSet := func(set string) bool {
		for _, v := range strings.Fields(set) {
			if v == divisor {
				return true
			}
		}
		return false
	}
	switch {
	case fs.Resource == "limits.cpu" || fs.Resource == "requests.cpu":
		if !inSet("1m 1") {
			errs = append(errs, field.Invalid(fldPath.Child("divisor"), fs.Resource, "only divisor's values 1m and 1 are supported with the cpu resource"))
		}
	case fs.Resource == "limits.memory" || fs.Resource == "requests.memory":
		if !inSet(memoryDivisors) {
			errs = append(errs, field.Invalid(fldPath.Child("divisor"), fs.Resource, "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the memory resource"))
		}
	case fs.Resource == "limits.ephemeral-storage" || fs.Resource == "requests.ephemeral-storage":
		if !inSet(memoryDivisors) {
			errs = append(errs, field.Invalid(fldPath.Child("divisor"), fs.Resource, "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the local ephemeral storage resource"))
		}
	case strings.HasPrefix(fs.Resource, "requests.hugepages-") || strings.HasPrefix(fs.Resource, "limits.hugepages-"):
		if !inSet(memoryDivisors) {
			errs = append(errs, field.Invalid(fldPath.Child("divisor"), fs.Resource, "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the hugepages resource"))
		}
	}
	return errs
}

func validateKeySelector(name, key string, fldPath *field.Path) field.ErrorList {
	errs := validateName(apimachineryvalidation.NameIsDNSSubdomain, name, fldPath.Child("name"))
	if key == "" {
		errs = append(errs, field.Required(fldPath.Child("key"), ""))
	} else {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(fldPath.Child("key"), key, msg))
		}
	}
	return errs
}

func validateEnvFrom(sources []corev1.EnvFromSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range sources {
		idxPath := fldPath.Index(i)
		if ev.Prefix != "" {
			errs = append(errs, validateEnvVarName(ev.Prefix, idxPath.Child("prefix"))...)
		}
		n := 0
		if ev.ConfigMapRef != nil {
			n++
			errs = append(errs, validateEnvSourceName(ev.ConfigMapRef.Name, idxPath.Child("configMapRef"))...)
		}
		if ev.SecretRef != nil {
			n++
			errs = append(errs, validateEnvSourceName(ev.SecretRef.Name, idxPath.Child("secretRef"))...)
		}
		if n == 0 {
			errs = append(errs, field.Invalid(fldPath, "", "must specify one of: `configMapRef` or `secretRef`"))
		} else if n > 1 {
			errs = append(errs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
		}
	}
	return errs
}

func validateEnvSourceName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath.Child("name"), "")}
	}
	var errs field.ErrorList
	for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(name, true) {
		errs = append(errs, field.Invalid(fldPath.Child("name"), name, msg))
	}
	return errs
}

func validateVolumeMounts(mounts []corev1.VolumeMount, devices map[string]string, vols map[string]corev1.VolumeSource, c *corev1.Container, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	mountPoints := map[string]bool{}
	for i, m := range mounts {
		idxPath := fldPath.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(idxPath.Child("name"), ""))
		}
		if _, ok := vols[m.Name]; !ok {
			errs = append(errs, field.NotFound(idxPath.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(idxPath.Child("mountPath"), ""))
		}
		if mountPoints[m.MountPath] {
			errs = append(errs, field.Invalid(idxPath.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountPoints[m.MountPath] = true
		if _, ok := devices[m.Name]; ok {
			errs = append(errs, field.Invalid(idxPath.Child("name"), m.Name, "must not already exist in volumeDevices"))
		}
		for _, dp := range devices {
			if dp == m.MountPath {
				errs = append(errs, field.Invalid(idxPath.Child("mountPath"), m.MountPath, "must not already exist as a path in volumeDevices"))
				break
			}
		}
		if v, ok := vols[m.Name]; ok && v.Image != nil {
			if m.SubPath != "" {
				errs = append(errs, field.Invalid(idxPath.Child("subPath"), m.SubPath, "not allowed in image volume sources"))
			}
			if m.SubPathExpr != "" {
				errs = append(errs, field.Invalid(idxPath.Child("subPathExpr"), m.SubPathExpr, "not allowed in image volume sources"))
			}
		}
		if m.SubPath != "" {
			errs = append(errs, validateLocalDescendingPath(m.SubPath, idxPath.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				errs = append(errs, field.Invalid(idxPath.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			errs = append(errs, validateLocalDescendingPath(m.SubPathExpr, idxPath.Child("subPathExpr"))...)
		}
		if m.MountPropagation != nil {
			errs = append(errs, validateMountPropagation(*m.MountPropagation, c, idxPath.Child("mountPropagation"))...)
		}
		errs = append(errs, validateRecursiveReadOnly(m, idxPath.Child("recursiveReadOnly"))...)
	}
	return errs
}

func validateMountPropagation(mode corev1.MountPropagationMode, c *corev1.Container, fldPath *field.Path) field.ErrorList {
	switch mode {
	case corev1.MountPropagationBidirectional:
		privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
		if !privileged {
			return field.ErrorList{field.Forbidden(fldPath, "Bidirectional mount propagation is available only to privileged containers")}
		}
		return nil
	case corev1.MountPropagationHostToContainer, corev1.MountPropagationNone:
		return nil
	default:
		return field.ErrorList{field.NotSupported(fldPath, mode, []corev1.MountPropagationMode{corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer, corev1.MountPropagationNone})}
	}
}

func validateRecursiveReadOnly(m corev1.VolumeMount, fldPath *field.Path) field.ErrorList {
	if m.RecursiveReadOnly == nil {
		return nil
	}
	var errs field.ErrorList
	switch *m.RecursiveReadOnly {
	case corev1.RecursiveReadOnlyDisabled:
	case corev1.RecursiveReadOnlyEnabled, corev1.RecursiveReadOnlyIfPossible:
		if !m.ReadOnly {
			errs = append(errs, field.Forbidden(fldPath, "may only be specified when readOnly is true"))
		}
		if m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone {
			errs = append(errs, field.Forbidden(fldPath, "may only be specified when mountPropagation is None or not specified"))
		}
	default:
		errs = append(errs, field.NotSupported(fldPath, *m.RecursiveReadOnly, []corev1.RecursiveReadOnlyMode{corev1.RecursiveReadOnlyDisabled, corev1.RecursiveReadOnlyEnabled, corev1.RecursiveReadOnlyIfPossible}))
	}
	return errs
}

func validateVolumeDevices(devices []corev1.VolumeDevice, mounts map[string]string, vols map[string]corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths, names := map[string]bool{}, map[string]bool{}
	for i, d := range devices {
		idxPath := fldPath.Index(i)
		src, matched := vols[d.Name]
		if d.Name == "" {
			errs = append(errs, field.Required(idxPath.Child("name"), ""))
		}
		if names[d.Name] {
			errs = append(errs, field.Invalid(idxPath.Child("name"), d.Name, "must be unique"))
		}
		if matched && src.PersistentVolumeClaim == nil && src.Ephemeral == nil {
			errs = append(errs, field.Invalid(idxPath.Child("name"), d.Name, "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode"))
		}
		if !matched {
			errs = append(errs, field.NotFound(idxPath.Child("name"), d.Name))
		}
		if d.DevicePath == "" {
			errs = append(errs, field.Required(idxPath.Child("devicePath"), ""))
		}
		if paths[d.DevicePath] {
			errs = append(errs, field.Invalid(idxPath.Child("devicePath"), d.DevicePath, "must be unique"))
		}
		if d.DevicePath != "" && len(validatePathNoBacksteps(d.DevicePath, idxPath.Child("devicePath"))) > 0 {
			errs = append(errs, field.Invalid(idxPath.Child("devicePath"), d.DevicePath, "can not contain backsteps ('..')"))
		} else {
			paths[d.DevicePath] = true
		}
		if _, ok := mounts[d.Name]; ok {
			errs = append(errs, field.Invalid(idxPath.Child("name"), d.Name, "must not already exist in volumeMounts"))
		}
		for _, mp := range mounts {
			if mp == d.DevicePath {
				errs = append(errs, field.Invalid(idxPath.Child("devicePath"), d.DevicePath, "must not already exist as a path in volumeMounts"))
				break
			}
		}
		if d.Name != "" {
			names[d.Name] = true
		}
	}
	return errs
}

func validatePullPolicy(policy corev1.PullPolicy, fldPath *field.Path) field.ErrorList {
	switch policy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	default:
		return field.ErrorList{field.NotSupported(fldPath, policy, []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever})}
	}
}

func validateResizePolicy(policies []corev1.ContainerResizePolicy, fldPath *field.Path, podRestartPolicy corev1.RestartPolicy) field.ErrorList {
	var errs field.ErrorList
	seen := map[corev1.ResourceName]bool{}
	for i, p := range policies {
		if seen[p.ResourceName] {
			errs = append(errs, field.Duplicate(fldPath.Index(i), p.ResourceName))
		}
		seen[p.ResourceName] = true
		switch p.ResourceName {
		case corev1.ResourceCPU, corev1.ResourceMemory:
		case "":
			errs = append(errs, field.Required(fldPath, ""))
		default:
			errs = append(errs, field.NotSupported(fldPath, p.ResourceName, []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}))
		}
		switch p.RestartPolicy {
		case corev1.NotRequired, corev1.RestartContainer:
		case "":
			errs = append(errs, field.Required(fldPath, ""))
		default:
			errs = append(errs, field.NotSupported(fldPath, p.RestartPolicy, []corev1.ResourceResizeRestartPolicy{corev1.NotRequired, corev1.RestartContainer}))
		}
		if podRestartPolicy == corev1.RestartPolicyNever && p.RestartPolicy != corev1.NotRequired {
			errs = append(errs, field.Invalid(fldPath, p.RestartPolicy, "must be 'NotRequired' when `restartPolicy` is 'Never'"))
		}
	}
	return errs
}

func validateSecurityContext(sc *corev1.SecurityContext, fldPath *field.Path, hostUsers bool) field.ErrorList {
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
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
	if sc.ProcMount != nil {
		switch *sc.ProcMount {
		case corev1.DefaultProcMount, corev1.UnmaskedProcMount:
		default:
			errs = append(errs, field.NotSupported(fldPath.Child("procMount"), *sc.ProcMount, []corev1.ProcMountType{corev1.DefaultProcMount, corev1.UnmaskedProcMount}))
		}
		if hostUsers && *sc.ProcMount == corev1.UnmaskedProcMount {
			errs = append(errs, field.Invalid(fldPath.Child("procMount"), sc.ProcMount, "`hostUsers` must be false to use `Unmasked`"))
		}
	}
	errs = append(errs, validateSeccompProfile(sc.SeccompProfile, fldPath.Child("seccompProfile"))...)
	errs = append(errs, validateAppArmorProfile(sc.AppArmorProfile, fldPath.Child("appArmorProfile"))...)
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		if sc.Privileged != nil && *sc.Privileged {
			errs = append(errs, field.Invalid(fldPath, sc, "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
		}
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Add {
				if string(c) == "CAP_SYS_ADMIN" {
					errs = append(errs, field.Invalid(fldPath, sc, "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
				}
			}
		}
	}
	return errs
}

// Probes and lifecycle handlers.

func validateLivenessProbe(p *corev1.Probe, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	errs := validateProbe(p, gracePeriod, fldPath)
	if p.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(fldPath.Child("successThreshold"), p.SuccessThreshold, "must be 1"))
	}
	return errs
}

func validateReadinessProbe(p *corev1.Probe, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	errs := validateProbe(p, gracePeriod, fldPath)
	if p.TerminationGracePeriodSeconds != nil {
		errs = append(errs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), p.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
	}
	return errs
}

func validateStartupProbe(p *corev1.Probe, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	errs := validateProbe(p, gracePeriod, fldPath)
	if p.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(fldPath.Child("successThreshold"), p.SuccessThreshold, "must be 1"))
	}
	return errs
}

func validateProbe(p *corev1.Probe, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	h := handler{exec: p.Exec, httpGet: p.HTTPGet, tcpSocket: p.TCPSocket, grpc: p.GRPC}
	errs := validateHandler(h, gracePeriod, fldPath)
	errs = append(errs, validateNonnegative(int64(p.InitialDelaySeconds), fldPath.Child("initialDelaySeconds"))...)
	errs = append(errs, validateNonnegative(int64(p.TimeoutSeconds), fldPath.Child("timeoutSeconds"))...)
	errs = append(errs, validateNonnegative(int64(p.PeriodSeconds), fldPath.Child("periodSeconds"))...)
	errs = append(errs, validateNonnegative(int64(p.SuccessThreshold), fldPath.Child("successThreshold"))...)
	errs = append(errs, validateNonnegative(int64(p.FailureThreshold), fldPath.Child("failureThreshold"))...)
	if p.TerminationGracePeriodSeconds != nil && *p.TerminationGracePeriodSeconds <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), *p.TerminationGracePeriodSeconds, "must be greater than 0"))
	}
	return errs
}

func validateLifecycle(l *corev1.Lifecycle, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, hp := range []struct {
		h    *corev1.LifecycleHandler
		name string
	}{{l.PostStart, "postStart"}, {l.PreStop, "preStop"}} {
		if hp.h != nil {
			errs = append(errs, validateHandler(handler{exec: hp.h.Exec, httpGet: hp.h.HTTPGet, tcpSocket: hp.h.TCPSocket, sleep: hp.h.Sleep}, gracePeriod, fldPath.Child(hp.name))...)
		}
	}
	if l.StopSignal != nil {
		if !isValidSignal(*l.StopSignal) {
			errs = append(errs, field.NotSupported(fldPath.Child("stopSignal"), *l.StopSignal, []corev1.Signal{corev1.SIGTERM, corev1.SIGKILL, corev1.SIGINT, corev1.SIGQUIT}))
		}
	}
	return errs
}

// isValidSignal accepts the signal names of the core API (SIGxxx and SIGRTMIN/SIGRTMAX forms).
func isValidSignal(s corev1.Signal) bool {
	return strings.HasPrefix(string(s), "SIG") && len(s) > 3
}

type handler struct {
	exec      *corev1.ExecAction
	httpGet   *corev1.HTTPGetAction
	tcpSocket *corev1.TCPSocketAction
	grpc      *corev1.GRPCAction
	sleep     *corev1.SleepAction
}

func validateHandler(h handler, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	add := func(name string, set bool, validate func(*field.Path) field.ErrorList) {
		if !set {
			return
		}
		if n > 0 {
			errs = append(errs, field.Forbidden(fldPath.Child(name), "may not specify more than 1 handler type"))
			return
		}
		n++
		errs = append(errs, validate(fldPath.Child(name))...)
	}
	add("exec", h.exec != nil, func(p *field.Path) field.ErrorList {
		if len(h.exec.Command) == 0 {
			return field.ErrorList{field.Required(p.Child("command"), "")}
		}
		return nil
	})
	add("httpGet", h.httpGet != nil, func(p *field.Path) field.ErrorList {
		var e field.ErrorList
		if h.httpGet.Path == "" {
			e = append(e, field.Required(p.Child("path"), ""))
		}
		e = append(e, validatePortNumOrName(h.httpGet.Port, p.Child("port"))...)
		if h.httpGet.Scheme != corev1.URISchemeHTTP && h.httpGet.Scheme != corev1.URISchemeHTTPS {
			e = append(e, field.NotSupported(p.Child("scheme"), h.httpGet.Scheme, []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}))
		}
		for _, header := range h.httpGet.HTTPHeaders {
			for _, msg := range validation.IsHTTPHeaderName(header.Name) {
				e = append(e, field.Invalid(p.Child("httpHeaders"), header.Name, msg))
			}
		}
		return e
	})
	add("tcpSocket", h.tcpSocket != nil, func(p *field.Path) field.ErrorList {
		return validatePortNumOrName(h.tcpSocket.Port, p.Child("port"))
	})
	add("grpc", h.grpc != nil, func(p *field.Path) field.ErrorList {
		return validatePortNumOrName(intstr.FromInt32(h.grpc.Port), p.Child("port"))
	})
	add("sleep", h.sleep != nil, func(p *field.Path) field.ErrorList {
		if gracePeriod != nil && (h.sleep.Seconds < 0 || h.sleep.Seconds > *gracePeriod) {
			return field.ErrorList{field.Invalid(p, h.sleep.Seconds, fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", *gracePeriod))}
		}
		return nil
	})
	if n == 0 {
		errs = append(errs, field.Required(fldPath, "must specify a handler type"))
	}
	return errs
}

// validatePortNumOrName validates a port given as a number or an IANA_SVC_NAME.
func validatePortNumOrName(port intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch port.Type {
	case intstr.Int:
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(fldPath, port.IntValue(), msg))
		}
	case intstr.String:
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			errs = append(errs, field.Invalid(fldPath, port.StrVal, msg))
		}
	default:
		errs = append(errs, field.InternalError(fldPath, fmt.Errorf("unknown type: %v", port.Type)))
	}
	return errs
}

// Path helpers.

// validateLocalDescendingPath requires a relative path without ".." elements.
func validateLocalDescendingPath(targetPath string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(targetPath) {
		errs = append(errs, field.Invalid(fldPath, targetPath, "must be a relative path"))
	}
	return append(errs, validatePathNoBacksteps(targetPath, fldPath)...)
}

func validatePathNoBacksteps(targetPath string, fldPath *field.Path) field.ErrorList {
	for _, item := range strings.Split(filepath.ToSlash(targetPath), "/") {
		if item == ".." {
			return field.ErrorList{field.Invalid(fldPath, targetPath, "must not contain '..'")}
		}
	}
	return nil
}

// validateLocalNonReservedPath additionally rejects paths starting with "..".
func validateLocalNonReservedPath(targetPath string, fldPath *field.Path) field.ErrorList {
	errs := validateLocalDescendingPath(targetPath, fldPath)
	if strings.HasPrefix(targetPath, "..") && !strings.HasPrefix(targetPath, "../") {
		errs = append(errs, field.Invalid(fldPath, targetPath, "must not start with '..'"))
	}
	return errs
}

// quantityIsNegative reports whether q < 0.
func quantityIsNegative(q resource.Quantity) bool { return q.Sign() < 0 }
