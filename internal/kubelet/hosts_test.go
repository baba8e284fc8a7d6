package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

func TestPodHostname(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b"
	for _, tc := range []struct {
		name                 string
		pod                  v1.Pod
		host, domain, kernel string
		fqdn                 bool
		wantErr, wantKernErr string
	}{
		{name: "pod name", pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}, host: "web", kernel: "web"},
		{name: "hostname and subdomain", pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
			Spec: v1.PodSpec{Hostname: "h", Subdomain: "sub"}}, host: "h", domain: "sub.ns.svc.cluster.local", kernel: "h"},
		{name: "fqdn", fqdn: true, pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
			Spec: v1.PodSpec{Hostname: "h", Subdomain: "sub"}}, host: "h", domain: "sub.ns.svc.cluster.local", kernel: "h.sub.ns.svc.cluster.local"},
		{name: "fqdn without subdomain", fqdn: true, pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}, host: "web", kernel: "web"},
		{name: "long name cut without its dash", pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: long, Namespace: "ns"}},
			host: strings.Repeat("a", 62), kernel: strings.Repeat("a", 62)},
		{name: "fqdn too long", fqdn: true, pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
			Spec: v1.PodSpec{Hostname: strings.Repeat("h", 40), Subdomain: "sub"}}, host: strings.Repeat("h", 40), domain: "sub.ns.svc.cluster.local",
			wantKernErr: "is too long (64 characters is the max, 65 characters requested)"},
		{name: "bad hostname", pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1.PodSpec{Hostname: "A_b"}},
			wantErr: `pod Hostname "A_b" is not a valid DNS label`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.pod.Spec.SetHostnameAsFQDN = &tc.fqdn
			host, domain, err := podHostname(&tc.pod, "")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || host != tc.host || domain != tc.domain {
				t.Fatalf("podHostname = %q, %q, %v; want %q, %q", host, domain, err, tc.host, tc.domain)
			}
			kernel, err := kernelHostname(host, domain, tc.pod.Spec.SetHostnameAsFQDN)
			if tc.wantKernErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantKernErr) {
					t.Fatalf("kernel hostname err %v, want %q", err, tc.wantKernErr)
				}
				return
			}
			if err != nil || kernel != tc.kernel {
				t.Errorf("kernelHostname = %q, %v; want %q", kernel, err, tc.kernel)
			}
		})
	}
}

func TestManagedHostsContent(t *testing.T) {
	aliases := []v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}}, {IP: "::2", Hostnames: []string{"six"}}}
	got := string(managedHosts([]string{"10.244.0.5", "fd00::5"}, "q-1", "svc.ns.svc.cluster.local", aliases))
	want := "# Kubernetes-managed hosts file.\n" +
		"127.0.0.1\tlocalhost\n" +
		"::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\n" +
		"fe00::0\tip6-mcastprefix\n" +
		"fe00::1\tip6-allnodes\n" +
		"fe00::2\tip6-allrouters\n" +
		"10.244.0.5\tq-1.svc.ns.svc.cluster.local\tq-1\n" +
		"fd00::5\tq-1.svc.ns.svc.cluster.local\tq-1\n" +
		"\n# Entries added by HostAliases.\n" +
		"123.45.67.89\tfoo\tbar\n" +
		"::2\tsix\n"
	if got != want {
		t.Errorf("managed hosts:\n%s\nwant:\n%s", got, want)
	}
	if got := string(managedHosts([]string{"10.244.0.5"}, "web", "", nil)); !strings.HasSuffix(got, "fe00::2\tip6-allrouters\n10.244.0.5\tweb\n") {
		t.Errorf("without subdomain and aliases:\n%s", got)
	}
	if got := string(hostNetworkHosts([]byte("127.0.0.1 node\n"), aliases[:1])); got != "# Kubernetes-managed hosts file (host network).\n127.0.0.1 node\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n" {
		t.Errorf("host network hosts:\n%s", got)
	}
}

// configRecorder is the CRI fake that keeps the configuration of every container created
// (the fake itself drops the mounts and environment).
type configRecorder struct {
	*critest.FakeRuntimeService
	mu      sync.Mutex
	configs map[string]*runtimeapi.ContainerConfig // by container ID
}

func recordConfigs(h *harness) *configRecorder {
	r := &configRecorder{FakeRuntimeService: h.rt, configs: map[string]*runtimeapi.ContainerConfig{}}
	h.k.cfg.Runtime = r
	return r
}

func (r *configRecorder) CreateContainer(ctx context.Context, sb string, cfg *runtimeapi.ContainerConfig, sbc *runtimeapi.PodSandboxConfig) (string, error) {
	id, err := r.FakeRuntimeService.CreateContainer(ctx, sb, cfg, sbc)
	if err == nil {
		r.mu.Lock()
		r.configs[id] = cfg
		r.mu.Unlock()
	}
	return id, err
}

func (r *configRecorder) config(t *testing.T, h *harness, pod *v1.Pod, name string) *runtimeapi.ContainerConfig {
	t.Helper()
	c := h.container(pod, name)
	if c == nil {
		t.Fatalf("container %s not created", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.configs[c.Id]
}

// TestHostsMount: every container gets the pod's kubelet-managed /etc/hosts but one that
// mounts its own; host-network pods get the node's file with their aliases.
func TestHostsMount(t *testing.T) {
	h := newHarness(t)
	rec := recordConfigs(h)
	h.k.cfg.HostsFile = writeFile(t, filepath.Join(t.TempDir(), "hosts"), "127.0.0.1\tnode-hosts\n")
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		Hostname: "h", Subdomain: "s", HostAliases: []v1.HostAlias{{IP: "1.2.3.4", Hostnames: []string{"foo"}}},
		Containers: []v1.Container{containerNamed("a", "img"), containerNamed("own", "img")},
	}})
	pod.Spec.Containers[1].VolumeMounts = []v1.VolumeMount{{Name: "hosts", MountPath: "/etc/hosts"}}
	h.setPod(pod)
	h.sync(pod)
	hostsOf := func(p *v1.Pod, name string) string {
		t.Helper()
		var paths []string
		for _, m := range rec.config(t, h, p, name).Mounts {
			if m.ContainerPath == "/etc/hosts" {
				paths = append(paths, m.HostPath)
			}
		}
		if len(paths) != 1 {
			t.Fatalf("container %s mounts /etc/hosts from %v, want once", name, paths)
		}
		return paths[0]
	}
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	path := hostsOf(pod, "a")
	content := read(path)
	if path != filepath.Join(h.k.cfg.RootDir, "pods", string(pod.UID), "etc-hosts") {
		t.Errorf("hosts file at %q", path)
	}
	if !strings.HasPrefix(content, "# Kubernetes-managed hosts file.\n") ||
		!strings.Contains(content, "\n192.168.192.168\th.s.default.svc.cluster.local\th\n") ||
		!strings.HasSuffix(content, "\n# Entries added by HostAliases.\n1.2.3.4\tfoo\n") {
		t.Errorf("managed hosts file:\n%s", content)
	}
	if p := hostsOf(pod, "own"); p != "/vol/hosts" {
		t.Errorf("container with its own /etc/hosts mounts %q there, want its volume", p)
	}

	hn := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hn", UID: "uid-hn"}, Spec: v1.PodSpec{
		HostNetwork: true, HostAliases: []v1.HostAlias{{IP: "1.2.3.4", Hostnames: []string{"foo", "bar"}}},
		Containers: []v1.Container{containerNamed("a", "img")},
	}})
	h.sync(hn)
	want := "# Kubernetes-managed hosts file (host network).\n127.0.0.1\tnode-hosts\n\n# Entries added by HostAliases.\n1.2.3.4\tfoo\tbar\n"
	if got := read(hostsOf(hn, "a")); got != want {
		t.Errorf("host-network hosts:\n%s\nwant:\n%s", got, want)
	}
}
