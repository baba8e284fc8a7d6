// Package flowcluster starts, inside a test process, the cluster that the
// classic Deployment flow needs: a control plane (API server over embedded
// etcd), the Deployment and ReplicaSet controllers and the scheduler, each
// with its own certificate as `kubette up` runs them, and one simulated node.
// Tests of what the API server records and shows (trace, the /ui/ page) drive
// it with client-go or kubectl. Only tests import it.
package flowcluster

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/internal/apiserver/admission/serviceaccount"
	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/deployment"
	"github.com/kubette/kubette/internal/controller/replicaset"
	"github.com/kubette/kubette/internal/controllermanager"
	"github.com/kubette/kubette/internal/controlplane"
	"github.com/kubette/kubette/internal/scheduler"
	"github.com/kubette/kubette/internal/scheduler/plugins"
	"github.com/kubette/kubette/internal/sim"
)

// Cluster is a running flow cluster; it stops when the test ends.
type Cluster struct {
	// Admin is the administrator's client configuration.
	Admin *rest.Config
	// Kubeconfig is the path of the administrator's kubeconfig, for kubectl.
	Kubeconfig string
}

// Start runs a flow cluster until t ends and waits for its node to be Ready.
func Start(t testing.TB) *Cluster {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cp, err := controlplane.Start(ctx, controlplane.Config{DataDir: t.TempDir(), BindAddress: "127.0.0.1", Port: port, UnsafeNoFsync: true, Logger: quiet,
		// Only the Deployment and ReplicaSet controllers run: no default ServiceAccounts.
		DisableAdmissionPlugins: []string{serviceaccount.Name}})
	if err != nil {
		cancel()
		t.Fatalf("start control plane: %v", err)
	}
	var done []chan error
	t.Cleanup(func() {
		cancel()
		for _, d := range done {
			<-d
		}
		if err := cp.Wait(); err != nil {
			t.Errorf("control plane stopped with: %v", err)
		}
	})
	run := func(f func() error) {
		d := make(chan error, 1)
		done = append(done, d)
		go func() { d <- f() }()
	}
	admin, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cp.ComponentConfig("kube-controller-manager", "system:kube-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := cp.ComponentConfig("kube-scheduler", "system:kube-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	run(func() error {
		return controllermanager.Run(ctx, controller.ManagerOptions{Config: cm, ControllerConfig: cp.ServiceAccountConfig, Enabled: []string{deployment.Name, replicaset.Name}, Logger: quiet})
	})
	run(func() error {
		return scheduler.RunWithLeaderElection(ctx, sc, scheduler.Options{Registry: plugins.NewInTreeRegistry(), Profile: plugins.DefaultProfile(), Logger: quiet})
	})
	s, err := sim.New(admin, sim.Options{Nodes: 1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	run(func() error { return s.Run(ctx) })
	select {
	case <-s.Ready():
	case <-time.After(2 * time.Minute):
		t.Fatal("simulated node not ready")
	}
	return &Cluster{Admin: admin, Kubeconfig: cp.Kubeconfig}
}
