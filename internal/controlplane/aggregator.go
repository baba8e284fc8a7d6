package controlplane

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/transport"
	apiregistrationclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	apiregistrationinformers "k8s.io/kube-aggregator/pkg/client/informers/externalversions"
	"k8s.io/kube-aggregator/pkg/controllers/status/metrics"
	"k8s.io/kube-aggregator/pkg/controllers/status/remote"

	"github.com/kubette/kubette/internal/apiserver"
	"github.com/kubette/kubette/internal/controller/apiservice"
	"github.com/kubette/kubette/internal/pki"
)

// The front proxy: the client certificate the API server presents to extension API
// servers, from a CA of its own (upstream's --requestheader-client-ca-file and
// --proxy-client-cert-file), and the name extension servers allow.
const (
	frontProxyDir        = "front-proxy"
	frontProxyClientName = "front-proxy-client"
	// ExtensionAuthConfigMap is the ConfigMap in kube-system that tells extension API
	// servers how to authenticate the API server's requests (upstream's name).
	ExtensionAuthConfigMap = "extension-apiserver-authentication"
)

// frontProxy is the front proxy's CA and client certificate.
type frontProxy struct {
	ca              *pki.CA
	cert            tls.Certificate
	certPEM, keyPEM []byte
}

// loadFrontProxy reads (or makes on first start) the front-proxy CA and its client
// certificate under pkiDir/front-proxy.
func loadFrontProxy(pkiDir string) (*frontProxy, error) {
	dir := filepath.Join(pkiDir, frontProxyDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	ca, err := pki.LoadOrCreateCA(dir, "front-proxy-ca")
	if err != nil {
		return nil, fmt.Errorf("front-proxy CA: %w", err)
	}
	certPEM, keyPEM, err := ca.LoadOrIssue(dir, frontProxyClientName, pki.CertSpec{CommonName: frontProxyClientName, Client: true})
	if err != nil {
		return nil, fmt.Errorf("front-proxy client certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parse the front-proxy client certificate: %w", err)
	}
	return &frontProxy{ca: ca, cert: cert, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// extensionAuthData is what upstream's cluster authentication trust controller
// publishes: the CA of client certificates, and the requestheader configuration (the
// front-proxy CA, the allowed client name and the headers), each list as JSON.
func extensionAuthData(clientCA []byte, fp *frontProxy) (map[string]string, error) {
	lists := map[string][]string{
		"requestheader-allowed-names":        {frontProxyClientName},
		"requestheader-username-headers":     {"X-Remote-User"},
		"requestheader-uid-headers":          {"X-Remote-Uid"},
		"requestheader-group-headers":        {"X-Remote-Group"},
		"requestheader-extra-headers-prefix": {"X-Remote-Extra-"},
	}
	data := map[string]string{"client-ca-file": string(clientCA), "requestheader-client-ca-file": string(fp.ca.CertPEM)}
	for k, v := range lists {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", k, err)
		}
		data[k] = string(b)
	}
	return data, nil
}

// ensureExtensionAuth creates or updates kube-system/extension-apiserver-authentication.
func ensureExtensionAuth(ctx context.Context, client kubernetes.Interface, data map[string]string) error {
	cms := client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	cur, err := cms.Get(ctx, ExtensionAuthConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ExtensionAuthConfigMap}, Data: data}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s: %w", ExtensionAuthConfigMap, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", ExtensionAuthConfigMap, err)
	}
	same := len(cur.Data) == len(data)
	for k, v := range data {
		if cur.Data[k] != v {
			same = false
		}
	}
	if same {
		return nil
	}
	cur = cur.DeepCopy()
	cur.Data = data
	if _, err := cms.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update %s: %w", ExtensionAuthConfigMap, err)
	}
	return nil
}

// runAggregator starts API aggregation until ctx ends: it publishes the requestheader
// configuration, lets the server proxy to remote APIServices with the front-proxy
// certificate, and runs, over the server's loopback client, the controllers upstream's
// aggregator runs: autoregistration of the local APIServices (built-in and custom
// resource group-versions), the registration of every APIService with the proxy, and
// upstream's own availability controller of remote APIServices (reasons Passed,
// ServiceNotFound, ServicePortError, EndpointsNotFound, MissingEndpoints,
// FailedDiscoveryCheck).
func runAggregator(ctx, readyCtx context.Context, srv *apiserver.Server, clientCA []byte, fp *frontProxy, log *slog.Logger) error {
	loop := srv.LoopbackConfig()
	kube, err := kubernetes.NewForConfig(loop)
	if err != nil {
		return fmt.Errorf("loopback client: %w", err)
	}
	data, err := extensionAuthData(clientCA, fp)
	if err != nil {
		return err
	}
	if err := ensureExtensionAuth(readyCtx, kube, data); err != nil {
		return err
	}
	reg, err := apiregistrationclient.NewForConfig(loop)
	if err != nil {
		return fmt.Errorf("apiregistration loopback client: %w", err)
	}
	ext, err := apiextensionsclient.NewForConfig(loop)
	if err != nil {
		return fmt.Errorf("apiextensions loopback client: %w", err)
	}
	regF := apiregistrationinformers.NewSharedInformerFactory(reg, 0)
	kubeF := informers.NewSharedInformerFactory(kube, 0)
	extF := apiextensionsinformers.NewSharedInformerFactory(ext, 0)
	apiServices := regF.Apiregistration().V1().APIServices()
	services := kubeF.Core().V1().Services()
	slices := kubeF.Discovery().V1().EndpointSlices()
	resolver := apiservice.Resolver{Services: services.Lister(), EndpointSlices: slices.Lister()}
	srv.EnableAggregation(apiserver.AggregationConfig{Resolver: resolver, ProxyClientCert: fp.cert})

	local, err := apiservice.NewLocal(reg.ApiregistrationV1(), apiServices, extF.Apiextensions().V1().CustomResourceDefinitions(), srv.BuiltinGroupVersions(), log)
	if err != nil {
		return err
	}
	registrar, err := apiservice.NewRegistrar(apiServices, srv, log)
	if err != nil {
		return err
	}
	available, err := remote.New(apiServices, services, slices, reg.ApiregistrationV1(),
		&transport.DialHolder{Dial: apiserver.AggregatorDial}, func() ([]byte, []byte) { return fp.certPEM, fp.keyPEM },
		resolver, metrics.New())
	if err != nil {
		return fmt.Errorf("remote APIService availability controller: %w", err)
	}
	regF.Start(ctx.Done())
	kubeF.Start(ctx.Done())
	extF.Start(ctx.Done())
	go local.Run(ctx, 2)
	go registrar.Run(ctx, 2)
	go available.Run(2, ctx.Done())
	return nil
}
