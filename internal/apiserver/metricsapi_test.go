package apiserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/metrics/scraper"
	"github.com/kubette/kubette/internal/pki"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// oneNodeKubelet answers for every node with a node using 100m more each 15 s.
func oneNodeKubelet() scraper.Source {
	var mu sync.Mutex
	calls := map[string]int{}
	return scraper.SourceFunc(func(_ context.Context, n *corev1.Node) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[n.Name]++
		c := calls[n.Name]
		ts := time.Unix(1700000000, 0).Add(time.Duration(c) * 15 * time.Second).UnixMilli()
		return []byte(fmt.Sprintf("node_cpu_usage_seconds_total %v %d\nnode_memory_working_set_bytes 1000 %d\n", 1.5*float64(c), ts, ts)), nil
	})
}

// startFakeMetricsServer is an extension server standing in for upstream's
// metrics-server: TLS for metrics-server.kube-system.svc, the front-proxy client
// certificate required, one node "from-metrics-server".
func startFakeMetricsServer(t *testing.T, frontProxyCA []byte) (*httptest.Server, *pki.CA) {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "metrics-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(pki.CertSpec{CommonName: "metrics-server", DNSNames: []string{"metrics-server.kube-system.svc"}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(frontProxyCA) {
		t.Fatal("no front-proxy CA")
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch req.URL.Path {
		case "/apis/metrics.k8s.io/v1beta1":
			_ = json.NewEncoder(w).Encode(metav1.APIResourceList{
				TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "metrics.k8s.io/v1beta1",
				APIResources: []metav1.APIResource{
					{Name: "nodes", Kind: "NodeMetrics", Verbs: metav1.Verbs{"get", "list"}},
					{Name: "pods", Kind: "PodMetrics", Namespaced: true, Verbs: metav1.Verbs{"get", "list"}},
				}})
		case "/apis/metrics.k8s.io/v1beta1/nodes":
			_ = json.NewEncoder(w).Encode(metricsv1beta1.NodeMetricsList{
				TypeMeta: metav1.TypeMeta{Kind: "NodeMetricsList", APIVersion: "metrics.k8s.io/v1beta1"},
				Items:    []metricsv1beta1.NodeMetrics{{ObjectMeta: metav1.ObjectMeta{Name: "from-metrics-server"}}}})
		default:
			http.NotFound(w, req)
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, ca
}

// TestMetricsAPIServiceSwitch: kubette serves metrics.k8s.io itself under a local
// APIService until a user points v1beta1.metrics.k8s.io at a Service (installs
// metrics-server, keeping kubette's automanaged label as kubectl apply does); then
// the aggregator proxies to it, also after a restart (the user's APIService is not
// turned back into the local one). Deleting it serves the local API again at once,
// and the next start creates the local APIService again.
func TestMetricsAPIServiceSwitch(t *testing.T) {
	dir := t.TempDir()
	opts := testenv.Options{DataDir: dir, MetricsSource: oneNodeKubelet(), MetricResolution: 100 * time.Millisecond}
	env := testenv.Start(t, opts)
	ctx := ctxT(t)
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodeNames := func(env *testenv.Env) ([]string, error) {
		mc, err := metricsclient.NewForConfig(env.Config)
		if err != nil {
			return nil, err
		}
		l, err := mc.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, n := range l.Items {
			out = append(out, n.Name)
		}
		return out, nil
	}
	servedBy := func(env *testenv.Env, want string) {
		t.Helper()
		poll.Until(t, "node metrics from "+want, poll.Explain(func() (bool, string) {
			got, err := nodeNames(env)
			if err != nil {
				return false, err.Error()
			}
			return len(got) == 1 && got[0] == want, fmt.Sprint(got)
		}))
	}
	apiService := func(env *testenv.Env) (*apiregistrationv1.APIService, error) {
		reg, err := apiregistrationclient.NewForConfig(env.Config)
		if err != nil {
			return nil, err
		}
		return reg.ApiregistrationV1().APIServices().Get(ctx, "v1beta1.metrics.k8s.io", metav1.GetOptions{})
	}
	servedBy(env, "n1")

	cm, err := env.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ms, msCA := startFakeMetricsServer(t, []byte(cm.Data["requestheader-client-ca-file"]))
	port := int32(ms.Listener.Addr().(*net.TCPAddr).Port)
	if _, err := env.Client.CoreV1().Services("kube-system").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-server"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var local *apiregistrationv1.APIService
	poll.Until(t, "the local APIService", poll.Check(func() (bool, error) {
		local, err = apiService(env)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}))
	user := local.DeepCopy()
	user.Spec.Service = &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server", Port: ptr.To(port)}
	user.Spec.CABundle = msCA.CertPEM
	reg, err := apiregistrationclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.ApiregistrationV1().APIServices().Update(ctx, user, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	servedBy(env, "from-metrics-server")

	// A restart leaves the user's APIService as it is. The local APIServices deleted
	// before it come back with autoregister's pass at start, after which the metrics
	// one would have been turned back.
	for _, name := range []string{"v1.apps", "v1.batch", "v1.policy"} {
		if err := reg.ApiregistrationV1().APIServices().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env.Stop()
	env = testenv.Start(t, opts)
	reg, err = apiregistrationclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "autoregister's pass at start", poll.Check(func() (bool, error) {
		for _, name := range []string{"v1.apps", "v1.batch", "v1.policy"} {
			if _, err := reg.ApiregistrationV1().APIServices().Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return false, nil
			} else if err != nil {
				return false, err
			}
		}
		return true, nil
	}))
	servedBy(env, "from-metrics-server")
	s, err := apiService(env)
	if err != nil || s.Spec.Service == nil || s.Spec.Service.Name != "metrics-server" {
		t.Fatalf("after a restart the APIService is %+v %v, want the user's", s, err)
	}

	// Deleting it serves kubette's API at once, and its APIService is back at start.
	if err := reg.ApiregistrationV1().APIServices().Delete(ctx, "v1beta1.metrics.k8s.io", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	servedBy(env, "n1")
	env.Stop()
	env = testenv.Start(t, opts)
	poll.Until(t, "the local APIService again", poll.Explain(func() (bool, string) {
		s, err := apiService(env)
		if err != nil {
			return false, err.Error()
		}
		return s.Spec.Service == nil && availableReason(s) == "True/Local", fmt.Sprintf("%+v %s", s.Spec, availableReason(s))
	}))
	servedBy(env, "n1")
}
