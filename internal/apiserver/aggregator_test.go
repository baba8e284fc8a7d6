package apiserver_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	apiregistrationclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/pki"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// availableReason returns the Available condition of an APIService as "Status/Reason".
func availableReason(s *apiregistrationv1.APIService) string {
	c := apiregistrationv1helper.GetAPIServiceConditionByType(s, apiregistrationv1.Available)
	if c == nil {
		return "none"
	}
	return string(c.Status) + "/" + c.Reason
}

// TestAPIServicesLocal: the built-in group-versions have local APIServices with
// upstream's priorities, Available with reason Local; a CustomResourceDefinition's
// served version gets one (1000/100) and loses it with the definition; upstream's
// validation refuses a bad name, priorities and a local caBundle; apiregistration.k8s.io
// is in discovery.
func TestAPIServicesLocal(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := ctxT(t)
	reg, err := apiregistrationclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	apis := reg.ApiregistrationV1().APIServices()
	poll.Until(t, "the built-in APIServices", poll.Check(func() (bool, error) {
		for _, name := range []string{"v1.", "v1.apps", "v1.apiextensions.k8s.io"} {
			s, err := apis.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			if availableReason(s) != "True/Local" {
				return false, fmt.Errorf("%s is %s", name, availableReason(s))
			}
		}
		return true, nil
	}))
	apps, err := apis.Get(ctx, "v1.apps", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if apps.Spec.GroupPriorityMinimum != 17800 || apps.Spec.VersionPriority != 15 || apps.Spec.Service != nil {
		t.Errorf("v1.apps spec = %+v, want 17800/15 local", apps.Spec)
	}
	if apps.Labels["kube-aggregator.kubernetes.io/automanaged"] != "onstart" {
		t.Errorf("v1.apps labels = %v, want automanaged onstart", apps.Labels)
	}

	groups, err := env.Client.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range groups.Groups {
		found = found || g.Name == "apiregistration.k8s.io"
	}
	if !found {
		t.Errorf("apiregistration.k8s.io missing from /apis")
	}

	for name, spec := range map[string]apiregistrationv1.APIServiceSpec{
		"v1.wrong.example.com": {Group: "example.com", Version: "v1", GroupPriorityMinimum: 100, VersionPriority: 10},
		"v1.zero.example.com":  {Group: "zero.example.com", Version: "v1"},
		"v1.ca.example.com":    {Group: "ca.example.com", Version: "v1", GroupPriorityMinimum: 100, VersionPriority: 10, CABundle: []byte("x")},
	} {
		_, err := apis.Create(ctx, &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		got := causes(t, err)
		want := map[string]string{
			"v1.wrong.example.com": "metadata.name: Invalid value: \"v1.wrong.example.com\": must be `spec.version+\".\"+spec.group`: \"v1.example.com\"",
			"v1.zero.example.com":  "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000\nspec.versionPriority: Invalid value: 0: must be positive and less than 1000",
			"v1.ca.example.com":    "spec.caBundle: Invalid value: \"1 bytes\": local APIServices may not have a caBundle",
		}[name]
		if got != want {
			t.Errorf("create %s: causes\n%s\nwant\n%s", name, got, want)
		}
	}

	ext, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	crd := widgetCRD(objectSchema(map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)}}))
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the CRD's APIService", poll.Check(func() (bool, error) {
		s, err := apis.Get(ctx, "v1.example.com", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if s.Spec.GroupPriorityMinimum != 1000 || s.Spec.VersionPriority != 100 || availableReason(s) != "True/Local" {
			return false, fmt.Errorf("v1.example.com = %+v %s", s.Spec, availableReason(s))
		}
		return true, nil
	}))
	if err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the CRD's APIService to go", poll.Check(func() (bool, error) {
		_, err := apis.Get(ctx, "v1.example.com", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}))
}

// extensionServer is an extension API server on 127.0.0.1 serving wardle.example.com/
// v1alpha1 over TLS for the name wardle.default.svc, requiring a client certificate of
// the front-proxy CA; it records the requests it got.
type extensionServer struct {
	srv  *httptest.Server
	ca   *pki.CA
	mu   sync.Mutex
	seen []*http.Request
}

func startExtensionServer(t *testing.T, frontProxyCA []byte) *extensionServer {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "wardle-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(pki.CertSpec{CommonName: "wardle", DNSNames: []string{"wardle.default.svc"}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(frontProxyCA) {
		t.Fatal("no front-proxy CA in the ConfigMap")
	}
	e := &extensionServer{ca: ca}
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		e.mu.Lock()
		e.seen = append(e.seen, req)
		e.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch req.URL.Path {
		case "/apis/wardle.example.com/v1alpha1":
			_ = json.NewEncoder(w).Encode(metav1.APIResourceList{
				TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
				GroupVersion: "wardle.example.com/v1alpha1",
				APIResources: []metav1.APIResource{
					{Name: "flunders", SingularName: "flunder", Namespaced: true, Kind: "Flunder", Verbs: metav1.Verbs{"get", "list"}},
					{Name: "flunders/status", Namespaced: true, Kind: "Flunder", Verbs: metav1.Verbs{"get"}},
				},
			})
		case "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders":
			_, _ = fmt.Fprintf(w, `{"kind":"FlunderList","apiVersion":"wardle.example.com/v1alpha1","metadata":{},"items":[],"query":%q}`, req.URL.RawQuery)
		default:
			http.NotFound(w, req)
		}
	}))
	e.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	e.srv.StartTLS()
	t.Cleanup(e.srv.Close)
	return e
}

func (e *extensionServer) port(t *testing.T) int32 {
	_, p, err := net.SplitHostPort(e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return int32(n)
}

// last returns the last request to path.
func (e *extensionServer) last(path string) *http.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.seen) - 1; i >= 0; i-- {
		if e.seen[i].URL.Path == path {
			return e.seen[i]
		}
	}
	return nil
}

// TestAPIServiceRemote: the requestheader configuration is published; a remote
// APIService backed by an extension server (an ExternalName Service of localhost)
// becomes Available (Passed); requests under its group-version are proxied after
// authentication with the caller in the X-Remote-* headers over a connection carrying
// the front-proxy client certificate; its group is in /apis and in aggregated
// discovery; an APIService whose Service is missing is unavailable (ServiceNotFound)
// and answers 503.
func TestAPIServiceRemote(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := ctxT(t)
	var cm *corev1.ConfigMap
	poll.Until(t, "the extension-apiserver-authentication ConfigMap", poll.Check(func() (bool, error) {
		var err error
		cm, err = env.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}))
	for k, want := range map[string]string{
		"requestheader-allowed-names":        `["front-proxy-client"]`,
		"requestheader-username-headers":     `["X-Remote-User"]`,
		"requestheader-group-headers":        `["X-Remote-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
		"client-ca-file":                     string(env.CA().CertPEM),
	} {
		if cm.Data[k] != want {
			t.Errorf("%s = %q, want %q", k, cm.Data[k], want)
		}
	}
	ext := startExtensionServer(t, []byte(cm.Data["requestheader-client-ca-file"]))

	if _, err := env.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "wardle"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reg, err := apiregistrationclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	apis := reg.ApiregistrationV1().APIServices()
	caPEM := ext.ca.CertPEM
	for name, spec := range map[string]apiregistrationv1.APIServiceSpec{
		"v1alpha1.wardle.example.com": {Group: "wardle.example.com", Version: "v1alpha1", GroupPriorityMinimum: 2000, VersionPriority: 200,
			Service: &apiregistrationv1.ServiceReference{Namespace: "default", Name: "wardle", Port: ptr.To(ext.port(t))}, CABundle: caPEM},
		"v1.missing.example.com": {Group: "missing.example.com", Version: "v1", GroupPriorityMinimum: 2000, VersionPriority: 200,
			Service: &apiregistrationv1.ServiceReference{Namespace: "default", Name: "nothere"}, InsecureSkipTLSVerify: true},
	} {
		if _, err := apis.Create(ctx, &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	for name, want := range map[string]string{"v1alpha1.wardle.example.com": "True/Passed", "v1.missing.example.com": "False/ServiceNotFound"} {
		poll.Until(t, name+" "+want, poll.Explain(func() (bool, string) {
			s, err := apis.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return availableReason(s) == want, availableReason(s)
		}))
	}
	poll.Until(t, "the proxy to know the APIService is available", poll.Check(func() (bool, error) {
		err := env.Client.CoreV1().RESTClient().Get().AbsPath("/apis/wardle.example.com/v1alpha1/namespaces/default/flunders").Do(ctx).Error()
		if apierrors.IsServiceUnavailable(err) {
			return false, nil
		}
		return err == nil, err
	}))

	raw, err := env.Client.CoreV1().RESTClient().Get().AbsPath("/apis/wardle.example.com/v1alpha1/namespaces/default/flunders").
		Param("limit", "5").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"query":"limit=5"`) {
		t.Errorf("answer %s, want the query passed on", raw)
	}
	req := ext.last("/apis/wardle.example.com/v1alpha1/namespaces/default/flunders")
	if req == nil {
		t.Fatal("the extension server got no request")
	}
	if u := req.Header.Get("X-Remote-User"); u != "kubernetes-admin" {
		t.Errorf("X-Remote-User = %q, want kubernetes-admin", u)
	}
	if g := req.Header.Values("X-Remote-Group"); !contains(g, "system:masters") || !contains(g, "system:authenticated") {
		t.Errorf("X-Remote-Group = %v, want system:masters and system:authenticated", g)
	}
	if a := req.Header.Get("Authorization"); a != "" {
		t.Errorf("Authorization %q passed on", a)
	}
	if cn := req.TLS.PeerCertificates[0].Subject.CommonName; cn != "front-proxy-client" {
		t.Errorf("client certificate %q, want front-proxy-client", cn)
	}

	// An impersonated user is the one passed on, with its extra.
	imp := *env.Config
	imp.Impersonate.UserName = "jane"
	imp.Impersonate.Groups = []string{"wardens"}
	imp.Impersonate.Extra = map[string][]string{"scopes": {"a"}}
	// jane may not read flunders: authorization happens before the proxy.
	impClient, err := apiregistrationclient.NewForConfig(&imp)
	if err != nil {
		t.Fatal(err)
	}
	err = impClient.ApiregistrationV1().RESTClient().Get().AbsPath("/apis/wardle.example.com/v1alpha1/namespaces/default/flunders").Do(ctx).Error()
	if !apierrors.IsForbidden(err) {
		t.Errorf("jane's request: %v, want 403 before the proxy", err)
	}

	groups, err := env.Client.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	var wardle *metav1.APIGroup
	for i := range groups.Groups {
		if groups.Groups[i].Name == "wardle.example.com" {
			wardle = &groups.Groups[i]
		}
	}
	if wardle == nil || wardle.PreferredVersion.GroupVersion != "wardle.example.com/v1alpha1" {
		t.Errorf("/apis has wardle.example.com as %+v", wardle)
	}
	_, lists, err := env.Client.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Logf("discovery: %v", err) // missing.example.com is not in it: only wardle counts
	}
	var flunders bool
	for _, l := range lists {
		if l.GroupVersion != "wardle.example.com/v1alpha1" {
			continue
		}
		for _, r := range l.APIResources {
			flunders = flunders || r.Name == "flunders"
		}
	}
	if !flunders {
		t.Errorf("aggregated discovery has no wardle.example.com/v1alpha1 flunders: %v", lists)
	}

	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		out, err := exec.Command(kubectl, "--kubeconfig", env.Kubeconfig, "get", "apiservices",
			"v1.apps", "v1alpha1.wardle.example.com", "v1.missing.example.com").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl get apiservices: %v\n%s", err, out)
		}
		var rows []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			rows = append(rows, strings.Join(f[:len(f)-1], " ")) // without AGE
		}
		want := []string{"NAME SERVICE AVAILABLE", "v1.apps Local True", "v1alpha1.wardle.example.com default/wardle True",
			"v1.missing.example.com default/nothere False (ServiceNotFound)"}
		if !reflect.DeepEqual(rows, want) {
			t.Errorf("kubectl get apiservices:\n%s\nwant rows %q", out, want)
		}
	}

	err = env.Client.CoreV1().RESTClient().Get().AbsPath("/apis/missing.example.com/v1/things").Do(ctx).Error()
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("request to an unavailable APIService: %v, want 503", err)
	}
	if err := apis.Delete(ctx, "v1alpha1.wardle.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the proxy to forget the APIService", poll.Check(func() (bool, error) {
		err := env.Client.CoreV1().RESTClient().Get().AbsPath("/apis/wardle.example.com/v1alpha1/namespaces/default/flunders").Do(ctx).Error()
		return apierrors.IsNotFound(err), nil
	}))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
