package sim_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/pki"
	"github.com/kubette/kubette/internal/sim"
	"github.com/kubette/kubette/internal/testenv"
)

// TestAPIServerReachesSimulatedKubelet runs the API server and a simulator whose kubelet
// port has a certificate of the cluster's CA: pods/log of a simulated pod comes from the
// simulator's port on loopback, and exec answers that the node is simulated.
func TestAPIServerReachesSimulatedKubelet(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	certPEM, keyPEM, err := env.CA().Issue(pki.CertSpec{CommonName: "kubette-sim", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = startSim(t, env.Config, sim.Options{Nodes: 2, KubeletTLS: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: env.CA().Pool()}})
	ctx := context.Background()
	c := env.Client
	createNamespace(t, c, "logs")
	if _, err := c.CoreV1().Pods("logs").Create(ctx, newPod("logs", "web", "sim-node-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := runningPods(t, c, "logs", 1)[0]
	node, err := c.CoreV1().Nodes().Get(ctx, "sim-node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := node.Status.Addresses[0].Address; a != sim.DefaultNodeIP {
		t.Fatalf("InternalIP %s, want %s", a, sim.DefaultNodeIP)
	}

	body, err := c.CoreV1().Pods("logs").GetLogs("web", &corev1.PodLogOptions{Timestamps: true}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("pods/log: %v", err)
	}
	want := pod.Status.StartTime.UTC().Format("2006-01-02T15:04:05Z") + " [kubette sim] container app (image registry.example/app:1) of pod logs/web started on simulated node sim-node-1"
	if !strings.HasPrefix(string(body), want) {
		t.Fatalf("pods/log: %q, want it to start with %q", body, want)
	}
	stream, err := c.CoreV1().Pods("logs").GetLogs("web", &corev1.PodLogOptions{Follow: true, TailLines: ptr.To[int64](1)}).Stream(ctx)
	if err != nil {
		t.Fatalf("pods/log follow: %v", err)
	}
	line := make([]byte, 14)
	if _, err := io.ReadFull(stream, line); err != nil || string(line) != "[kubette sim] " {
		t.Fatalf("followed log: %q (%v)", line, err)
	}
	_ = stream.Close()
	_, err = c.CoreV1().Pods("logs").GetLogs("web", &corev1.PodLogOptions{Previous: true}).Stream(ctx) // Stream decodes a Status, DoRaw does not
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `previous terminated container "app" in pod "web" not found`) {
		t.Fatalf("previous log: %v, want the kubelet's 400", err)
	}

	// exec, over SPDY (proxied to the port as is) and over WebSocket (translated by the API server).
	req := c.CoreV1().RESTClient().Post().Resource("pods").Namespace("logs").Name("web").SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "app", Command: []string{"ls"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	spdyExec, err := remotecommand.NewSPDYExecutor(env.Config, http.MethodPost, req.URL())
	if err != nil {
		t.Fatal(err)
	}
	wsExec, err := remotecommand.NewWebSocketExecutor(env.Config, http.MethodGet, req.URL().String())
	if err != nil {
		t.Fatal(err)
	}
	for name, ex := range map[string]remotecommand.Executor{"spdy": spdyExec, "websocket": wsExec} {
		var out, errOut bytes.Buffer
		err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
		if err == nil || !strings.Contains(err.Error(), "pod logs/web runs on simulated node sim-node-1 (kubette sim), which runs no containers: there is no container to run a command in") {
			t.Errorf("exec over %s: %v (output %q %q), want the error that the node is simulated", name, err, out.String(), errOut.String())
		}
	}
}
