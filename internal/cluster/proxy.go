package cluster

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/controlplane"
	"github.com/kubette/kubette/internal/proxy"
)

// DefaultServiceCIDR and DefaultClusterCIDR are the address ranges of Services (unless
// --service-cluster-ip-range says otherwise) and pods. The cluster range holds this node's
// pod range (DefaultPodCIDR, 10.244.0.0/24) and the default pod ranges of `kubette sim`
// (10.128.0.0/10): the proxy's guard rejects packets to the addresses of the Nodes' pod
// CIDRs in it (spec.podCIDRs, simulated nodes' too) that no local route serves, so nothing
// that dials a simulated pod sends a packet off this machine. The rest of the cluster range
// is never rejected: the host's own network (its resolver, say) may lie in it.
const (
	DefaultServiceCIDR = "10.96.0.0/12"
	DefaultClusterCIDR = "10.128.0.0/9"
)

// startProxy runs the service proxy of this node in mode (iptables, the default, or
// nftables): Services and EndpointSlices become iptables or nftables rules, and packets to the service range serviceCIDR that no rule DNATed are
// rejected here.
func startProxy(ctx context.Context, cp *controlplane.ControlPlane, nodeName, serviceCIDR, mode string, log *slog.Logger, run func(name string, f func(context.Context) error)) error {
	restCfg, err := cp.ComponentConfig("proxy", "system:kube-proxy")
	if err != nil {
		return fmt.Errorf("proxy credentials: %w", err)
	}
	pc := rest.CopyConfig(restCfg)
	pc.ContentType, pc.AcceptContentTypes = "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(pc)
	if err != nil {
		return fmt.Errorf("proxy client: %w", err)
	}
	p, err := proxy.New(proxy.Options{
		Client: client, NodeName: nodeName,
		ServiceCIDR: serviceCIDR, ClusterCIDR: DefaultClusterCIDR,
		RejectUnroutedPodCIDR: true, Mode: mode,
		Logger: log.With("component", "proxy"),
	})
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	run("proxy", p.Run)
	return nil
}
