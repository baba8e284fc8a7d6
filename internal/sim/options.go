package sim

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
)

// Labels and annotations the simulator reads or writes.
const (
	// LabelSimulated marks every simulated node ("true").
	LabelSimulated = "kubette.io/simulated"
	// AnnotationExitAfter on a pod with restartPolicy Never or OnFailure makes its
	// containers exit with code 0 that long (a Go duration, such as "5s") after the
	// pod started, so that the pod Succeeds.
	AnnotationExitAfter = "kubette.io/sim-exit-after"
	// LeaseNamespace holds the node Leases, as upstream.
	LeaseNamespace = corev1.NamespaceNodeLease
	// KubeletVersion is what simulated nodes report as status.nodeInfo.kubeletVersion.
	KubeletVersion = "v1.32.0-kubette-sim"
)

// Defaults of Options.
const (
	DefaultNamePrefix       = "sim-node-"
	DefaultPodCIDRBase      = "10.128.0.0/10"
	DefaultNodeCIDRMaskSize = 24
	DefaultNodeIP           = "127.0.0.1"
	DefaultLeaseDuration    = 40 * time.Second
	DefaultStatusInterval   = 5 * time.Minute
	DefaultHeartbeatQPS     = 250
	DefaultWorkers          = 32
	DefaultMaxDeletionGrace = time.Second
	DefaultClientQPS        = 5000
	DefaultClientBurst      = 10000
)

// DefaultCapacity is the capacity (and allocatable) of a simulated node unless
// Options.Capacity says otherwise: cpu 32, memory 256Gi, pods 110,
// ephemeral-storage 100Gi.
func DefaultCapacity() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("32"),
		corev1.ResourceMemory:           resource.MustParse("256Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
}

// Options configure a simulator. The zero value of every field but Nodes means
// its default.
type Options struct {
	// Nodes is how many nodes to simulate (required).
	Nodes int
	// NamePrefix names the nodes NamePrefix0 … NamePrefix(Nodes-1).
	NamePrefix string
	// Capacity of each node, also its allocatable; resources left out take
	// their value from DefaultCapacity.
	Capacity corev1.ResourceList
	// Labels go on every node, besides kubernetes.io/hostname, kubernetes.io/os,
	// kubernetes.io/arch, LabelSimulated and, with Zones, topology.kubernetes.io/zone.
	Labels map[string]string
	// Taints go on every node.
	Taints []corev1.Taint
	// Zones spreads the nodes round-robin over zones sim-zone-0 … sim-zone-(Zones-1)
	// (label topology.kubernetes.io/zone, and topology.kubernetes.io/region=sim);
	// 0 sets no zone.
	Zones int
	// PodCIDRBase is carved into one pod CIDR of NodeCIDRMaskSize bits per node,
	// node i taking the i-th (default 10.128.0.0/10, which holds 16384 /24s). The
	// pods' addresses exist nowhere: the range should lie in the cluster CIDR of
	// the proxy (kubette up's is 10.128.0.0/9), whose guard rejects packets to
	// the Nodes' pod CIDRs in it (these nodes' spec.podCIDRs) that no local
	// route serves, so that nothing dialling a simulated pod sends a packet
	// off this machine. The range should not hold the host's own network: the
	// guard would reject what the simulated nodes' CIDRs cover of it.
	PodCIDRBase string
	// NodeCIDRMaskSize is the prefix length of each node's pod CIDR (default 24).
	NodeCIDRMaskSize int
	// NodeIP is the InternalIP of every node and the address their kubelet
	// port listens on (default 127.0.0.1): the API server reaches the nodes'
	// kubelet there, for pods/log, exec, attach and port-forward. It must be an
	// address of this machine, so that no request to a simulated node leaves it.
	NodeIP string
	// KubeletPort is the port of the simulated nodes' kubelet API, published as
	// status.daemonEndpoints.kubeletEndpoint.Port (default 0: a free port chosen
	// when Run starts). One listener serves every node.
	KubeletPort int
	// KubeletTLS is how the kubelet port serves HTTPS: its certificate (one the
	// API server trusts for NodeIP, i.e. issued by the cluster's CA) and
	// ClientCAs, the CAs of the clients it accepts (the API server's kubelet
	// client certificate); clients must present a certificate. Nil serves a
	// self-signed certificate that accepts no client: the nodes then have a
	// kubelet port, but the API server cannot use it.
	KubeletTLS *tls.Config
	// LeaseDuration is spec.leaseDurationSeconds of each node Lease (default 40s).
	LeaseDuration time.Duration
	// LeaseRenewInterval is how often each Lease is renewed when HeartbeatQPS
	// allows it (default LeaseDuration/4, 10s, as the kubelet).
	LeaseRenewInterval time.Duration
	// StatusInterval is how often each node's conditions get a fresh
	// lastHeartbeatTime (default 5m, as the kubelet reports an unchanged status).
	StatusInterval time.Duration
	// HeartbeatQPS is the token bucket (shared by Lease renewals and node status
	// updates of all nodes) that bounds the heartbeat load on the API server.
	// When the nodes want more, every heartbeat is stretched evenly: a Lease is
	// then renewed every Nodes/HeartbeatQPS seconds instead of every
	// LeaseRenewInterval. Default: 250, raised when needed so that each Lease is
	// still renewed at least twice per LeaseDuration.
	HeartbeatQPS float64
	// HeartbeatBurst is the bucket's size (default HeartbeatQPS/10, at least 1).
	HeartbeatBurst int
	// Workers is how many pods (and, at start, nodes) are handled at once (default 32).
	Workers int
	// MaxDeletionGrace bounds how long a pod being deleted stays Terminating:
	// the simulator deletes it for good after min(its grace period,
	// MaxDeletionGrace). The default is 1s so that tests run fast; a negative
	// value honours the whole grace period, as a kubelet with containers that
	// ignore SIGTERM would.
	MaxDeletionGrace time.Duration
	// ClientQPS and ClientBurst are the client-side rate limits of the
	// simulator's API client (default 5000 and 10000).
	ClientQPS   float32
	ClientBurst int
	// Cleanup deletes the nodes and their Leases when Run returns; without it
	// they stay behind, as after a kubelet stops.
	Cleanup bool
	// Clock is the simulator's time source (default the real clock).
	Clock clock.WithTicker
	// Logger receives the simulator's logs (default: discarded).
	Logger *slog.Logger
}

// config is Options validated, with defaults applied and strings parsed.
type config struct {
	Options
	podCIDRBase netip.Prefix
	nodeIP      netip.Addr
}

// complete validates o and fills in its defaults.
func (o Options) complete() (*config, error) {
	c := &config{Options: o}
	if c.Nodes <= 0 {
		return nil, fmt.Errorf("nodes must be positive, got %d", c.Nodes)
	}
	if c.NamePrefix == "" {
		c.NamePrefix = DefaultNamePrefix
	}
	if errs := validation.IsDNS1123Subdomain(fmt.Sprintf("%s%d", c.NamePrefix, c.Nodes-1)); len(errs) > 0 {
		return nil, fmt.Errorf("name prefix %q does not make valid node names: %s", c.NamePrefix, strings.Join(errs, "; "))
	}
	capacity := DefaultCapacity()
	for name, q := range o.Capacity {
		if q.Sign() < 0 {
			return nil, fmt.Errorf("capacity %s must not be negative, got %s", name, q.String())
		}
		capacity[name] = q.DeepCopy()
	}
	c.Capacity = capacity
	if errs := metav1validation.ValidateLabels(c.Labels, field.NewPath("labels")); len(errs) > 0 {
		return nil, fmt.Errorf("invalid labels: %w", errs.ToAggregate())
	}
	for _, t := range c.Taints {
		if err := validateTaint(t); err != nil {
			return nil, err
		}
	}
	if c.Zones < 0 {
		return nil, fmt.Errorf("zones must not be negative, got %d", c.Zones)
	}
	var err error
	if c.PodCIDRBase == "" {
		c.PodCIDRBase = DefaultPodCIDRBase
	}
	if c.podCIDRBase, err = netip.ParsePrefix(c.PodCIDRBase); err != nil {
		return nil, fmt.Errorf("pod CIDR base: %w", err)
	}
	if c.NodeCIDRMaskSize == 0 {
		c.NodeCIDRMaskSize = DefaultNodeCIDRMaskSize
	}
	if _, err := subnet(c.podCIDRBase, c.NodeCIDRMaskSize, c.Nodes-1); err != nil {
		return nil, fmt.Errorf("pod CIDR base too small for %d nodes: %w", c.Nodes, err)
	}
	if c.NodeCIDRMaskSize > 29 {
		return nil, fmt.Errorf("node CIDR mask size /%d leaves no pod addresses", c.NodeCIDRMaskSize)
	}
	if c.NodeIP == "" {
		c.NodeIP = DefaultNodeIP
	}
	if c.nodeIP, err = netip.ParseAddr(c.NodeIP); err != nil {
		return nil, fmt.Errorf("node IP: %w", err)
	}
	if c.nodeIP.Zone() != "" || c.nodeIP.IsUnspecified() || c.nodeIP.IsMulticast() {
		return nil, fmt.Errorf("node IP %s: want a unicast address of this machine", c.NodeIP)
	}
	if c.KubeletPort < 0 || c.KubeletPort > 65535 {
		return nil, fmt.Errorf("kubelet port must be in 0-65535, got %d", c.KubeletPort)
	}
	if c.KubeletTLS != nil {
		if len(c.KubeletTLS.Certificates) == 0 && c.KubeletTLS.GetCertificate == nil {
			return nil, errors.New("kubelet TLS configuration has no serving certificate")
		}
		if c.KubeletTLS.ClientCAs == nil {
			return nil, errors.New("kubelet TLS configuration has no client CAs")
		}
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.LeaseDuration < time.Second {
		return nil, fmt.Errorf("lease duration must be at least 1s, got %v", c.LeaseDuration)
	}
	if c.LeaseRenewInterval == 0 {
		c.LeaseRenewInterval = c.LeaseDuration / 4
	}
	if c.StatusInterval == 0 {
		c.StatusInterval = DefaultStatusInterval
	}
	if c.LeaseRenewInterval < 0 || c.StatusInterval < 0 {
		return nil, errors.New("lease renew and status intervals must be positive")
	}
	if c.HeartbeatQPS == 0 {
		// Enough to renew every Lease twice per lease duration besides the status updates.
		need := float64(c.Nodes)/(c.LeaseDuration.Seconds()/2) + float64(c.Nodes)/c.StatusInterval.Seconds()
		c.HeartbeatQPS = max(DefaultHeartbeatQPS, need)
	}
	if c.HeartbeatQPS < 0 {
		return nil, fmt.Errorf("heartbeat QPS must not be negative, got %v", c.HeartbeatQPS)
	}
	if c.HeartbeatBurst == 0 {
		c.HeartbeatBurst = max(1, int(c.HeartbeatQPS/10))
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Workers < 0 {
		return nil, fmt.Errorf("workers must be positive, got %d", c.Workers)
	}
	if c.MaxDeletionGrace == 0 {
		c.MaxDeletionGrace = DefaultMaxDeletionGrace
	}
	if c.ClientQPS == 0 {
		c.ClientQPS = DefaultClientQPS
	}
	if c.ClientBurst == 0 {
		c.ClientBurst = DefaultClientBurst
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// leaseRenewPeriod is how often each Lease is renewed once the token bucket is
// shared by every node's Lease renewals and status updates.
func (c *config) leaseRenewPeriod() time.Duration {
	n := float64(c.Nodes)
	statusRate := n / c.StatusInterval.Seconds()
	if c.HeartbeatQPS <= statusRate {
		return time.Duration(1<<63 - 1)
	}
	stretched := time.Duration(n / (c.HeartbeatQPS - statusRate) * float64(time.Second))
	return max(c.LeaseRenewInterval, stretched)
}

func validateTaint(t corev1.Taint) error {
	if errs := metav1validation.ValidateLabelName(t.Key, field.NewPath("key")); len(errs) > 0 {
		return fmt.Errorf("taint %q: %w", t.ToString(), errs.ToAggregate())
	}
	if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
		return fmt.Errorf("taint %q: value: %s", t.ToString(), strings.Join(msgs, "; "))
	}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return fmt.Errorf("taint %q: effect must be NoSchedule, PreferNoSchedule or NoExecute", t.ToString())
	}
	return nil
}

// ParseTaint parses a taint as kubectl taint writes it: key=value:Effect or key:Effect.
func ParseTaint(s string) (corev1.Taint, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return corev1.Taint{}, fmt.Errorf("taint %q: want key=value:Effect or key:Effect", s)
	}
	t := corev1.Taint{Effect: corev1.TaintEffect(s[i+1:])}
	kv := s[:i]
	if k, v, ok := strings.Cut(kv, "="); ok {
		t.Key, t.Value = k, v
	} else {
		t.Key = kv
	}
	if err := validateTaint(t); err != nil {
		return corev1.Taint{}, err
	}
	return t, nil
}

// ParseLabel parses one key=value label.
func ParseLabel(s string) (key, value string, err error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", fmt.Errorf("label %q: want key=value", s)
	}
	if errs := metav1validation.ValidateLabels(map[string]string{k: v}, field.NewPath("labels")); len(errs) > 0 {
		return "", "", fmt.Errorf("label %q: %w", s, errs.ToAggregate())
	}
	return k, v, nil
}
