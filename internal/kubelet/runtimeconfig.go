package kubelet

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Resource conversion constants, as upstream's.
const (
	minShares     = 2
	sharesPerCPU  = 1024
	milliCPUToCPU = 1000
	quotaPeriod   = 100000 // µs
	minQuota      = 1000   // µs
)

// podLogDir is the directory of a pod's container logs: LogDir/<ns>_<name>_<uid>.
func podLogDir(logDir string, pod *v1.Pod) string {
	return filepath.Join(logDir, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
}

// sandboxConfig builds the CRI sandbox configuration of a pod (pure: the caller reads dns from
// the host's resolv.conf and works out the hostname of the pod's UTS namespace).
func sandboxConfig(pod *v1.Pod, attempt uint32, logDir string, dns *runtimeapi.DNSConfig, hostname string) *runtimeapi.PodSandboxConfig {
	if pod.Spec.HostNetwork {
		// As upstream's kubelet: no hostname for a host-network sandbox, which shares the
		// node's UTS namespace (containerd refuses to set one there).
		hostname = ""
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt,
		},
		Hostname:     hostname,
		LogDirectory: podLogDir(logDir, pod),
		DnsConfig:    dns,
		Labels:       podLabels(pod),
		Annotations:  copyMap(pod.Annotations),
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: podCgroupParent(pod.UID),
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: namespaceOptions(pod),
			},
		},
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort == 0 {
					continue
				}
				cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{
					Protocol:      protocol(p.Protocol),
					ContainerPort: p.ContainerPort,
					HostPort:      p.HostPort,
					HostIp:        p.HostIP,
				})
			}
			if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
				cfg.Linux.SecurityContext.Privileged = true
			}
		}
	}
	if sc := pod.Spec.SecurityContext; sc != nil {
		ssc := cfg.Linux.SecurityContext
		if sc.RunAsUser != nil {
			ssc.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
		}
		if sc.RunAsGroup != nil {
			ssc.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
		}
		ssc.SupplementalGroups = append(ssc.SupplementalGroups, sc.SupplementalGroups...)
		if len(sc.Sysctls) > 0 {
			cfg.Linux.Sysctls = map[string]string{}
			for _, s := range sc.Sysctls {
				// The runtime gets the dotted form, as upstream's kubelet sends it.
				cfg.Linux.Sysctls[normalizeSysctl(s.Name)] = s.Value
			}
		}
	}
	return cfg
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func protocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

// namespaceOptions maps hostNetwork, hostPID, hostIPC and shareProcessNamespace.
func namespaceOptions(pod *v1.Pod) *runtimeapi.NamespaceOption {
	o := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		o.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		o.Pid = runtimeapi.NamespaceMode_POD
	}
	if pod.Spec.HostPID {
		o.Pid = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		o.Ipc = runtimeapi.NamespaceMode_NODE
	}
	return o
}

// parseResolvConf reads nameservers, search domains and options from resolv.conf text.
func parseResolvConf(data []byte) *runtimeapi.DNSConfig {
	d := &runtimeapi.DNSConfig{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) > 1 {
				d.Servers = append(d.Servers, f[1])
			}
		case "search", "domain":
			d.Searches = append([]string(nil), f[1:]...)
		case "options":
			d.Options = append(d.Options, f[1:]...)
		}
	}
	return d
}

// podDNS is a pod's DNS configuration by its dnsPolicy, as upstream's kubelet builds it:
// ClusterFirst (without host network) and ClusterFirstWithHostNet use the cluster DNS servers
// with the search path <ns>.svc.<domain>, svc.<domain>, <domain> (then the host's) and
// ndots:5; Default, and ClusterFirst when no cluster DNS is configured or the pod uses the
// host network, use the host's resolv.conf; None uses nothing but the pod's dnsConfig, which
// is merged into every other policy's result.
func podDNS(pod *v1.Pod, hostResolvConf string, clusterDNS []string, clusterDomain string) (*runtimeapi.DNSConfig, error) {
	d := &runtimeapi.DNSConfig{}
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = v1.DNSClusterFirst
	}
	useCluster := len(clusterDNS) > 0 && (policy == v1.DNSClusterFirstWithHostNet ||
		(policy == v1.DNSClusterFirst && !pod.Spec.HostNetwork))
	if policy != v1.DNSNone {
		data, err := os.ReadFile(hostResolvConf)
		if err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("read %s: %w", hostResolvConf, err)
		}
		d = parseResolvConf(data)
	}
	if useCluster {
		if clusterDomain == "" {
			clusterDomain = "cluster.local"
		}
		d.Servers = slices.Clone(clusterDNS)
		d.Searches = appendNew([]string{pod.Namespace + ".svc." + clusterDomain, "svc." + clusterDomain, clusterDomain}, d.Searches...)
		d.Options = []string{"ndots:5"}
	}
	if pc := pod.Spec.DNSConfig; pc != nil {
		d.Servers = appendNew(d.Servers, pc.Nameservers...)
		d.Searches = appendNew(d.Searches, pc.Searches...)
		for _, o := range pc.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			d.Options = mergeOption(d.Options, o.Name, opt)
		}
	}
	return d, nil
}

// mergeOption sets a resolver option, replacing one of the same name (the pod's dnsConfig
// overrides the policy's, e.g. ndots).
func mergeOption(opts []string, name, opt string) []string {
	for i, o := range opts {
		if n, _, _ := strings.Cut(o, ":"); n == name {
			opts[i] = opt
			return opts
		}
	}
	return append(opts, opt)
}

func appendNew(list []string, add ...string) []string {
	for _, a := range add {
		dup := false
		for _, l := range list {
			dup = dup || l == a
		}
		if !dup {
			list = append(list, a)
		}
	}
	return list
}

// linuxResources converts a container's requests and limits: cpu shares from the request,
// CFS quota from the limit, the memory limit, and an OOM score adjustment by QoS class
// (the runtime clamps it to what it may set).
func linuxResources(pod *v1.Pod, c *v1.Container, memoryCapacity int64) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	cpuReq, hasReq := c.Resources.Requests[v1.ResourceCPU]
	cpuLim, hasLim := c.Resources.Limits[v1.ResourceCPU]
	if !hasReq && hasLim {
		cpuReq, hasReq = cpuLim, true
	}
	r.CpuShares = minShares
	if hasReq {
		if s := cpuReq.MilliValue() * sharesPerCPU / milliCPUToCPU; s > minShares {
			r.CpuShares = s
		}
	}
	if hasLim && !cpuLim.IsZero() {
		r.CpuPeriod = quotaPeriod
		r.CpuQuota = max(cpuLim.MilliValue()*quotaPeriod/milliCPUToCPU, minQuota)
	}
	if m, ok := c.Resources.Limits[v1.ResourceMemory]; ok {
		r.MemoryLimitInBytes = m.Value()
	}
	switch qosClass(pod) {
	case v1.PodQOSGuaranteed:
		r.OomScoreAdj = -997
	case v1.PodQOSBestEffort:
		r.OomScoreAdj = 1000
	default:
		adj := int64(1000)
		if m, ok := c.Resources.Requests[v1.ResourceMemory]; ok && memoryCapacity > 0 {
			adj = 1000 - (1000*m.Value())/memoryCapacity
		}
		r.OomScoreAdj = min(max(adj, 2), 999)
	}
	return r
}

// qosClass computes the pod's QoS class as the API defines it.
func qosClass(pod *v1.Pod) v1.PodQOSClass {
	requests, limits := v1.ResourceList{}, v1.ResourceList{}
	guaranteed, any := true, false
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, rn := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
				req, hasReq := c.Resources.Requests[rn]
				lim, hasLim := c.Resources.Limits[rn]
				if hasReq && !req.IsZero() {
					any = true
					q := requests[rn]
					q.Add(req)
					requests[rn] = q
				}
				if hasLim && !lim.IsZero() {
					any = true
					q := limits[rn]
					q.Add(lim)
					limits[rn] = q
				} else {
					guaranteed = false
				}
				if hasReq && hasLim && req.Cmp(lim) != 0 {
					guaranteed = false
				}
			}
		}
	}
	if !any {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// containerSecurity maps a container's (and its pod's) security context.
func containerSecurity(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerSecurityContext {
	s := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaceOptions(pod)}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			s.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			s.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		s.SupplementalGroups = append(s.SupplementalGroups, psc.SupplementalGroups...)
		if psc.FSGroup != nil {
			s.SupplementalGroups = append(s.SupplementalGroups, *psc.FSGroup)
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			s.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
		}
		if sc.RunAsGroup != nil {
			s.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
		}
		if sc.Privileged != nil {
			s.Privileged = *sc.Privileged
		}
		if sc.ReadOnlyRootFilesystem != nil {
			s.ReadonlyRootfs = *sc.ReadOnlyRootFilesystem
		}
		if sc.AllowPrivilegeEscalation != nil {
			s.NoNewPrivs = !*sc.AllowPrivilegeEscalation
		}
		if caps := sc.Capabilities; caps != nil {
			s.Capabilities = &runtimeapi.Capability{}
			for _, a := range caps.Add {
				s.Capabilities.AddCapabilities = append(s.Capabilities.AddCapabilities, capName(a))
			}
			for _, d := range caps.Drop {
				s.Capabilities.DropCapabilities = append(s.Capabilities.DropCapabilities, capName(d))
			}
		}
	}
	return s
}

// capName spells a capability as the runtime expects it: CAP_X (ALL stays ALL).
func capName(c v1.Capability) string {
	s := strings.ToUpper(string(c))
	if s == "ALL" || strings.HasPrefix(s, "CAP_") {
		return s
	}
	return "CAP_" + s
}

// containerConfig builds the CRI configuration of one container instance.
func containerConfig(pod *v1.Pod, c *v1.Container, restartCount int, imageRef string, env []v1.EnvVar, mounts []*runtimeapi.Mount, memoryCapacity int64) *runtimeapi.ContainerConfig {
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:     expandAll(c.Command, env),
		Args:        expandAll(c.Args, env),
		WorkingDir:  c.WorkingDir,
		Mounts:      mounts,
		Labels:      containerLabels(pod, c),
		Annotations: containerAnnotations(pod, c, restartCount),
		LogPath:     filepath.Join(c.Name, strconv.Itoa(restartCount)+".log"),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       linuxResources(pod, c, memoryCapacity),
			SecurityContext: containerSecurity(pod, c),
		},
	}
	for _, e := range env {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	return cfg
}

// runtimeHandler is the CRI runtime handler of the pod's RuntimeClass: "" (the runtime's
// default) for a pod that names none, as upstream's runtimeclass manager. A class the
// kubelet does not know fails the sandbox (the API refused pods naming a missing class,
// so it was deleted since or the cache lags; the sync is retried).
func (k *Kubelet) runtimeHandler(pod *v1.Pod) (string, error) {
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return "", nil
	}
	name := *pod.Spec.RuntimeClassName
	rc, err := k.runtimeClasses.Get(name)
	if apierrors.IsNotFound(err) {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: %w", name, err)
	}
	return rc.Handler, nil
}
