package kubelet

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet-managed /etc/hosts, as upstream's kubelet writes it.
const (
	etcHostsPath                  = "/etc/hosts"
	etcHostsFile                  = "etc-hosts" // RootDir/pods/<uid>/etc-hosts
	managedHostsHeader            = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
	hostAliasesComment            = "# Entries added by HostAliases.\n"
	defaultClusterDomain          = "cluster.local"
	hostnameMaxLen                = 63 // a DNS label
	kernelNodenameMaxLen          = 64 // the kernel's nodename field, as upstream counts it
)

// podHostname is the pod's hostname (spec.hostname, else its name, cut to 63 characters
// without a trailing '-' or '.') and, when it has a subdomain, its domain
// <subdomain>.<namespace>.svc.<clusterDomain>, as upstream's GeneratePodHostNameAndDomain.
func podHostname(pod *v1.Pod, clusterDomain string) (hostname, domain string, err error) {
	if clusterDomain == "" {
		clusterDomain = defaultClusterDomain
	}
	hostname = pod.Name
	if pod.Spec.Hostname != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Hostname); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Hostname %q is not a valid DNS label: %s", pod.Spec.Hostname, strings.Join(msgs, ";"))
		}
		hostname = pod.Spec.Hostname
	}
	if len(hostname) > hostnameMaxLen {
		hostname = strings.TrimRight(hostname[:hostnameMaxLen], "-.")
		if hostname == "" {
			return "", "", fmt.Errorf("hostname for pod %q was invalid: %q", pod.Name, pod.Name)
		}
	}
	if pod.Spec.Subdomain != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Subdomain); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Subdomain %q is not a valid DNS label: %s", pod.Spec.Subdomain, strings.Join(msgs, ";"))
		}
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain)
	}
	return hostname, domain, nil
}

// kernelHostname is the hostname the pod's UTS namespace gets: the FQDN
// <hostname>.<domain> with setHostnameAsFQDN and a domain, else the short hostname. An FQDN
// longer than the kernel's nodename field is an error, as upstream.
func kernelHostname(hostname, domain string, setHostnameAsFQDN *bool) (string, error) {
	if domain == "" || setHostnameAsFQDN == nil || !*setHostnameAsFQDN {
		return hostname, nil
	}
	fqdn := hostname + "." + domain
	if len(fqdn) > kernelNodenameMaxLen {
		return "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)", fqdn, kernelNodenameMaxLen, len(fqdn))
	}
	return fqdn, nil
}

// managedHosts renders the /etc/hosts of a pod with its own network: the localhost and IPv6
// lines, each pod IP with the pod's FQDN (with a subdomain) and hostname, then the host
// aliases.
func managedHosts(podIPs []string, hostname, domain string, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

// hostNetworkHosts renders the /etc/hosts of a host-network pod: the node's file, then the
// host aliases.
func hostNetworkHosts(node []byte, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeaderHostNetwork)
	b.Write(node)
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

// hostAliasEntries renders the pod's hostAliases, one line per IP with its hostnames, under
// upstream's comment; nothing without aliases.
func hostAliasEntries(aliases []v1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n")
	b.WriteString(hostAliasesComment)
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}

// mountsEtcHosts tells whether a container mounts a volume of its own on /etc/hosts (the
// kubelet then leaves the file alone, as upstream).
func mountsEtcHosts(c *v1.Container) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath == etcHostsPath {
			return true
		}
	}
	return false
}

// hostsMount writes the pod's kubelet-managed hosts file (RootDir/pods/<uid>/etc-hosts) and
// returns the container's mount of it on /etc/hosts, or nil when the container mounts its own
// /etc/hosts or the pod has no IP yet (and no host network), as upstream's makeMounts.
func (k *Kubelet) hostsMount(pod *v1.Pod, c *v1.Container, podIPs []string) (*runtimeapi.Mount, error) {
	if mountsEtcHosts(c) || (len(podIPs) == 0 && !pod.Spec.HostNetwork) {
		return nil, nil
	}
	var content []byte
	if pod.Spec.HostNetwork {
		node, err := os.ReadFile(k.cfg.HostsFile)
		if err != nil {
			return nil, fmt.Errorf("hosts file: %w", err)
		}
		content = hostNetworkHosts(node, pod.Spec.HostAliases)
	} else {
		hostname, domain, err := podHostname(pod, k.cfg.ClusterDomain)
		if err != nil {
			return nil, err
		}
		content = managedHosts(podIPs, hostname, domain, pod.Spec.HostAliases)
	}
	dir := filepath.Join(k.cfg.RootDir, "pods", string(pod.UID))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("hosts file: %w", err)
	}
	p := filepath.Join(dir, etcHostsFile)
	if err := writeIfChanged(p, content, 0o644); err != nil {
		return nil, fmt.Errorf("hosts file: %w", err)
	}
	return &runtimeapi.Mount{ContainerPath: etcHostsPath, HostPath: p}, nil
}

// writeIfChanged writes data to path in place (containers bind-mount the file, so it keeps its
// inode, as upstream's) unless the file already holds it: a container of the pod reading the
// file while another one starts never sees it truncated. The mode is exact (no umask).
func writeIfChanged(path string, data []byte, mode os.FileMode) error {
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		return os.Chmod(path, mode)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		return err
	}
	return os.Chmod(path, mode)
}
