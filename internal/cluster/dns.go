package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/controlplane"
	"github.com/kubette/kubette/internal/dns"
)

// DNSServiceIP returns the ClusterIP of the kube-system/kube-dns Service, the pods'
// nameserver: the 10th address of the service range serviceCIDR (10.96.0.10 in
// 10.96.0.0/12), as kubeadm picks it.
func DNSServiceIP(serviceCIDR string) (string, error) {
	p, err := netip.ParsePrefix(serviceCIDR)
	if err != nil || !p.Addr().Is4() {
		return "", fmt.Errorf("service range %q: want an IPv4 CIDR", serviceCIDR)
	}
	if p.Bits() > 28 {
		return "", fmt.Errorf("service range %s has no 10th address for the cluster DNS Service", p)
	}
	a := p.Masked().Addr().As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) + 10
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}).String(), nil
}

// dnsManagedBy marks the kube-dns EndpointSlice as kubette's own (the EndpointSlice
// controller leaves Services without a selector alone).
const dnsManagedBy = "kubette-up"

// startDNS runs the cluster DNS server on the node's address and port, and publishes it as
// the kube-system/kube-dns Service (ClusterIP serviceIP, port 53) whose endpoint is that
// address: the proxy's rules carry pods' queries to it.
func startDNS(ctx context.Context, cp *controlplane.ControlPlane, serviceIP, nodeIP string, port int, log *slog.Logger, run func(name string, f func(context.Context) error)) error {
	restCfg, err := cp.ComponentConfig("dns", "system:kubette-dns")
	if err != nil {
		return fmt.Errorf("dns credentials: %w", err)
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("dns client: %w", err)
	}
	srv, err := dns.New(dns.Options{Client: client, Addr: net.JoinHostPort(nodeIP, strconv.Itoa(port)), Logger: log.With("component", "dns")})
	if err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	run("dns", srv.Run)
	// The Service is an add-on as kubeadm installs it, with the admin's rights: the DNS
	// server itself only reads.
	addonCfg, err := cp.ComponentConfig("addons", "system:kubette-addons", "system:masters")
	if err != nil {
		return fmt.Errorf("add-on credentials: %w", err)
	}
	addons, err := kubernetes.NewForConfig(addonCfg)
	if err != nil {
		return fmt.Errorf("add-on client: %w", err)
	}
	run("dns service", func(ctx context.Context) error {
		// Retried until it holds: the API server may still be starting its allocators.
		for {
			err := publishDNS(ctx, addons, serviceIP, nodeIP, int32(port))
			if err == nil || ctx.Err() != nil {
				return nil
			}
			log.Info("publishing the kube-dns Service", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	})
	return nil
}

// publishDNS creates (or repairs) the kube-dns Service and its EndpointSlice and Endpoints.
func publishDNS(ctx context.Context, client kubernetes.Interface, serviceIP, nodeIP string, port int32) error {
	const ns, name = "kube-system", "kube-dns"
	labels := map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}
	ports := []v1.ServicePort{
		{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(port)},
		{Name: "dns-tcp", Protocol: v1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(port)},
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       v1.ServiceSpec{ClusterIP: serviceIP, ClusterIPs: []string{serviceIP}, Ports: ports},
	}
	// Looked up first: a create of an existing Service that asks for its own ClusterIP fails
	// on the address, not on the name.
	if _, err := client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create Service %s/%s: %w", ns, name, err)
		}
	} else if err != nil {
		return fmt.Errorf("get Service %s/%s: %w", ns, name, err)
	}
	udp, tcp := v1.ProtocolUDP, v1.ProtocolTCP
	dnsName, tcpName := "dns", "dns-tcp"
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: dnsManagedBy}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{nodeIP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &dnsName, Protocol: &udp, Port: &port}, {Name: &tcpName, Protocol: &tcp, Port: &port}},
	}
	if err := upsertSlice(ctx, client, slice); err != nil {
		return err
	}
	ep := &v1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Subsets: []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{{IP: nodeIP}},
			Ports: []v1.EndpointPort{{Name: "dns", Protocol: v1.ProtocolUDP, Port: port}, {Name: "dns-tcp", Protocol: v1.ProtocolTCP, Port: port}}}},
	}
	cur, err := client.CoreV1().Endpoints(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = client.CoreV1().Endpoints(ns).Create(ctx, ep, metav1.CreateOptions{})
	case err == nil:
		ep.ResourceVersion = cur.ResourceVersion
		_, err = client.CoreV1().Endpoints(ns).Update(ctx, ep, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("Endpoints %s/%s: %w", ns, name, err)
	}
	return nil
}

// upsertSlice creates slice or replaces the one of the same name.
func upsertSlice(ctx context.Context, client kubernetes.Interface, slice *discoveryv1.EndpointSlice) error {
	api := client.DiscoveryV1().EndpointSlices(slice.Namespace)
	cur, err := api.Get(ctx, slice.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, slice, metav1.CreateOptions{})
	case err == nil:
		slice.ResourceVersion = cur.ResourceVersion
		_, err = api.Update(ctx, slice, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("EndpointSlice %s/%s: %w", slice.Namespace, slice.Name, err)
	}
	return nil
}
