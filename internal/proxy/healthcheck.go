package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/kubette/kubette/internal/proxy/iptables"
)

// healthServer is upstream kube-proxy's service health check server: every
// Service with a healthCheckNodePort (type LoadBalancer, externalTrafficPolicy
// Local) gets an HTTP server on that port of each node address, which answers
// 200 while this node has ready endpoints of the Service and 503 otherwise, so
// that a load balancer sends traffic only to nodes that keep it local. The
// body is upstream's JSON: the Service, localEndpoints (the distinct ready
// local endpoint addresses) and serviceProxyHealthy (here: the last sync
// succeeded).
type healthServer struct {
	// addrs are the addresses listened on; empty means every address.
	addrs []netip.Addr
	log   *slog.Logger

	mu       sync.RWMutex
	services map[serviceKey]*healthInstance
	healthy  bool
}

// healthInstance is one Service's health check port and its servers.
type healthInstance struct {
	port      int32
	servers   []*http.Server
	endpoints int
}

func newHealthServer(addrs []netip.Addr, log *slog.Logger) *healthServer {
	return &healthServer{addrs: addrs, log: log, services: map[serviceKey]*healthInstance{}, healthy: true}
}

// healthChecks returns, for every Service of m with a health check port, the
// port and the number of distinct ready endpoint addresses on node.
func healthChecks(m iptables.Model, node string) (ports map[serviceKey]int32, counts map[serviceKey]int) {
	ports, counts = map[serviceKey]int32{}, map[serviceKey]int{}
	for _, s := range m.Services {
		if s.HealthCheckNodePort <= 0 {
			continue
		}
		k := serviceKey{s.Namespace, s.Name}
		ports[k] = s.HealthCheckNodePort
		local := map[netip.Addr]bool{}
		for _, p := range s.Ports {
			for _, e := range p.Endpoints {
				if e.Ready && node != "" && e.NodeName == node {
					local[e.IP] = true
				}
			}
		}
		counts[k] = len(local)
	}
	return ports, counts
}

// sync opens the servers of new health check ports, closes those of Services
// gone (or whose port changed), and sets the endpoint counts. A port that
// cannot be opened is logged and retried at the next sync, as upstream.
func (h *healthServer) sync(ports map[serviceKey]int32, counts map[serviceKey]int, healthy bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.healthy = healthy
	for k, inst := range h.services {
		if port, ok := ports[k]; !ok || port != inst.port {
			h.log.Info("closing service health check", "service", k.namespace+"/"+k.name, "port", inst.port)
			inst.close()
			delete(h.services, k)
		}
	}
	for k, port := range ports {
		inst := h.services[k]
		if inst == nil {
			var err error
			if inst, err = h.open(k, port); err != nil {
				h.log.Error("cannot open the service health check port", "service", k.namespace+"/"+k.name, "port", port, "err", err)
				continue
			}
			h.log.Info("opened service health check", "service", k.namespace+"/"+k.name, "port", port)
			h.services[k] = inst
		}
		inst.endpoints = counts[k]
	}
}

// open listens on port of every address (all addresses when none is set)
// and serves k's health there. The caller holds h.mu.
func (h *healthServer) open(k serviceKey, port int32) (*healthInstance, error) {
	inst := &healthInstance{port: port}
	hosts := []string{""}
	if len(h.addrs) > 0 {
		hosts = hosts[:0]
		for _, a := range h.addrs {
			hosts = append(hosts, a.String())
		}
	}
	for _, host := range hosts {
		addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			inst.close()
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		srv := &http.Server{Handler: healthHandler{h: h, key: k}, ReadHeaderTimeout: 10 * time.Second}
		inst.servers = append(inst.servers, srv)
		// Ends when close shuts the server down (at the latest when the
		// proxy's Run returns).
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				h.log.Error("service health check server stopped", "service", k.namespace+"/"+k.name, "addr", addr, "err", err)
			}
		}()
	}
	return inst, nil
}

func (inst *healthInstance) close() {
	for _, s := range inst.servers {
		_ = s.Close()
	}
	inst.servers = nil
}

// closeAll closes every server.
func (h *healthServer) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, inst := range h.services {
		inst.close()
		delete(h.services, k)
	}
}

// healthHandler answers for one Service, on every path (as upstream).
type healthHandler struct {
	h   *healthServer
	key serviceKey
}

// healthBody is upstream's response document.
type healthBody struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

func (hh healthHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	hh.h.mu.RLock()
	inst, ok := hh.h.services[hh.key]
	var body healthBody
	if ok {
		body.LocalEndpoints = inst.endpoints
	}
	body.ServiceProxyHealthy = hh.h.healthy
	hh.h.mu.RUnlock()
	if !ok {
		// Closed meanwhile: upstream answers nothing either.
		return
	}
	body.Service.Namespace, body.Service.Name = hh.key.namespace, hh.key.name
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if body.LocalEndpoints > 0 && body.ServiceProxyHealthy {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	out, _ := json.MarshalIndent(body, "", "\t")
	_, _ = w.Write(out)
}
