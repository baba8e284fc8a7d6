package webhook_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/pki"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// hookServer is a webhook served over TLS on loopback with a certificate for the
// Service name webhook.<ns>.svc, signed by its own CA.
type hookServer struct {
	ca   []byte
	port int

	mu       sync.Mutex
	requests []*admissionv1.AdmissionRequest
}

func startHookServer(t *testing.T, ns string, routes map[string]func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) *hookServer {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "webhook-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(pki.CertSpec{CommonName: "webhook", DNSNames: []string{"webhook." + ns + ".svc"},
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	s := &hookServer{ca: ca.CertPEM, port: ln.Addr().(*net.TCPAddr).Port}
	mux := http.NewServeMux()
	for path, fn := range routes {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("timeout") == "" {
				http.Error(w, "no timeout parameter", http.StatusBadRequest)
				return
			}
			var review admissionv1.AdmissionReview
			if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
				http.Error(w, "bad review", http.StatusBadRequest)
				return
			}
			s.mu.Lock()
			s.requests = append(s.requests, review.Request)
			s.mu.Unlock()
			resp := fn(review.Request)
			resp.UID = review.Request.UID
			review.Response, review.Request = resp, nil
			_ = json.NewEncoder(w).Encode(&review)
		})
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *hookServer) last(path string) *admissionv1.AdmissionRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return nil
	}
	return s.requests[len(s.requests)-1]
}

// publish makes the Service webhook in ns, an ExternalName Service for localhost
// (EndpointSlices may not hold loopback addresses; the unit tests cover endpoint
// resolution).
func (s *hookServer) publish(t *testing.T, ctx context.Context, c kubernetes.Interface, ns string) {
	t.Helper()
	if _, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
			Ports: []corev1.ServicePort{{Name: "https", Port: int32(s.port)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (s *hookServer) service(ns, path string) admissionregistrationv1.WebhookClientConfig {
	port := int32(s.port)
	return admissionregistrationv1.WebhookClientConfig{CABundle: s.ca,
		Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "webhook", Path: &path, Port: &port}}
}

func allow(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true}
}

var (
	none      = admissionregistrationv1.SideEffectClassNone
	ignore    = admissionregistrationv1.Ignore
	configmap = []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}}
)

// TestWebhooks drives both webhook plugins through the API server with client-go:
// a validating webhook reached through a Service's endpoint refuses with its
// message, a mutating one's JSON patch is applied (and defaults after it), the
// AdmissionReview carries the request, selectors choose, failure policies and
// timeouts decide what an unreachable or slow webhook does, and requests on the
// configurations themselves never go to webhooks.
func TestWebhooks(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	const ns = "default"
	hooks := startHookServer(t, ns, map[string]func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse{
		"/validate": func(r *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			var cm corev1.ConfigMap
			_ = json.Unmarshal(r.Object.Raw, &cm)
			if cm.Data["deny"] != "" {
				return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: "the configmap contains unwanted key and value", Code: 403}}
			}
			return &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{"seen by the webhook"}}
		},
		"/mutate": func(r *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			pt := admissionv1.PatchTypeJSONPatch
			patch := `[{"op":"add","path":"/data/mutated","value":"yes"}]`
			if r.Resource.Resource == "pods" {
				patch = `[{"op":"add","path":"/spec/initContainers","value":[{"name":"injected","image":"busybox"}]}]`
			}
			return &admissionv1.AdmissionResponse{Allowed: true, PatchType: &pt, Patch: []byte(patch)}
		},
		"/slow": func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			time.Sleep(3 * time.Second)
			return &admissionv1.AdmissionResponse{Allowed: true}
		},
		"/deny-all": func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return &admissionv1.AdmissionResponse{}
		},
	})
	hooks.publish(t, ctx, c, ns)

	// A validating webhook on configmaps, skipping those labelled skip=yes.
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-configmaps"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "deny.configmaps.example.com", ClientConfig: hooks.service(ns, "/validate"), Rules: configmap,
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "skip", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"yes"}}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "not-skip-cel", Expression: "!has(object.data) || !('skip-cel' in object.data)"},
				{Name: "user-may-list", Expression: "authorizer.group('').resource('configmaps').namespace(request.namespace).check('list').allowed()"},
			},
		}},
	}
	created, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w := created.Webhooks[0]; *w.FailurePolicy != admissionregistrationv1.Fail || *w.MatchPolicy != admissionregistrationv1.Equivalent ||
		*w.TimeoutSeconds != 10 || *w.Rules[0].Scope != admissionregistrationv1.AllScopes || w.NamespaceSelector == nil {
		t.Errorf("defaults: %+v", w)
	}
	deny := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Data: map[string]string{"deny": "yes"}}
	poll.Until(t, "the validating webhook refuses", func() error {
		_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, deny, metav1.CreateOptions{})
		if err == nil {
			_ = c.CoreV1().ConfigMaps(ns).Delete(ctx, "bad", metav1.DeleteOptions{})
			return fmt.Errorf("created")
		}
		want := `admission webhook "deny.configmaps.example.com" denied the request: the configmap contains unwanted key and value`
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("refusal: %v", err)
		}
		return nil
	})
	req := hooks.last("/validate")
	if req.Operation != admissionv1.Create || req.Kind.Kind != "ConfigMap" || req.Resource.Resource != "configmaps" ||
		req.Namespace != ns || req.Name != "bad" || req.UserInfo.Username == "" || !strings.Contains(string(req.Options.Raw), `"CreateOptions"`) ||
		!strings.Contains(string(req.Object.Raw), `"apiVersion":"v1"`) || req.RequestKind == nil || req.RequestKind.Kind != "ConfigMap" {
		t.Errorf("AdmissionRequest: %+v", req)
	}
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cel-skip"},
		Data: map[string]string{"deny": "yes", "skip-cel": "1"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("a false matchCondition should skip the webhook: %v", err)
	}
	deny.Labels = map[string]string{"skip": "yes"}
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		t.Errorf("the object selector should skip the webhook: %v", err)
	}

	// A mutating webhook: its patch is applied; a pod it gives an init container
	// gets the defaults of that container.
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "mutate"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mutate.example.com", ClientConfig: hooks.service(ns, "/mutate"), SideEffects: &none, AdmissionReviewVersions: []string{"v1beta1", "v1"},
			Rules: append(configmap, admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}),
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"mutate": "yes"}},
		}},
	}
	if _, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the mutating webhook patches", func() error {
		cm, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "m-", Labels: map[string]string{"mutate": "yes"}}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data["mutated"] != "yes" {
			return fmt.Errorf("data %v", cm.Data)
		}
		return nil
	})
	if got := hooks.last("/mutate"); got == nil {
		t.Fatal("mutating webhook not called")
	}
	pod, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"mutate": "yes"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.InitContainers) != 1 || pod.Spec.InitContainers[0].TerminationMessagePolicy != corev1.TerminationMessageReadFile {
		t.Errorf("init container after mutation and defaults: %+v", pod.Spec.InitContainers)
	}

	// A webhook that cannot be reached fails closed (500) with failurePolicy Fail,
	// and is skipped with Ignore; a slow one times out with its timeout in the URL.
	unreachable := hooks.service(ns, "/validate")
	unreachable.Service.Name = "no-such-service"
	one := int32(1)
	fail := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "fail"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "fail.example.com", ClientConfig: unreachable, Rules: configmap, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"case": "fail"}},
		}, {
			Name: "ignore.example.com", ClientConfig: unreachable, Rules: configmap, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:  &ignore,
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"case": "ignore"}},
		}, {
			Name: "slow.example.com", ClientConfig: hooks.service(ns, "/slow"), Rules: configmap, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds: &one,
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"case": "slow"}},
		}},
	}
	if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, fail, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labelled := func(v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: v + "-", Labels: map[string]string{"case": v}}}
	}
	poll.Until(t, "fail closed", func() error {
		_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, labelled("fail"), metav1.CreateOptions{})
		if err == nil {
			return fmt.Errorf("created")
		}
		if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), `failed calling webhook "fail.example.com"`) {
			t.Fatalf("fail closed: %v", err)
		}
		return nil
	})
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, labelled("ignore"), metav1.CreateOptions{}); err != nil {
		t.Errorf("fail open: %v", err)
	}
	_, err = c.CoreV1().ConfigMaps(ns).Create(ctx, labelled("slow"), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "deadline") || !strings.Contains(err.Error(), "/slow?timeout=1s") {
		t.Errorf("slow webhook: %v", err)
	}

	// A webhook that refuses everything does not stop the removal of configurations.
	all := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "deny-all.example.com", ClientConfig: hooks.service(ns, "/deny-all"), SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}},
			}},
		}},
	}
	if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, all, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "everything refused", func() error {
		_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, labelled("any"), metav1.CreateOptions{})
		if err != nil && strings.Contains(err.Error(), `admission webhook "deny-all.example.com" denied the request without explanation`) {
			return nil
		}
		return fmt.Errorf("not refused: %v", err)
	})
	for _, name := range []string{"deny-all", "fail", "deny-configmaps"} {
		if err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete %s: %v", name, err)
		}
	}
	poll.Until(t, "configmaps admitted again", func() error {
		_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-" + strconv.Itoa(int(time.Now().UnixNano()%1e6))},
			Data: map[string]string{"deny": "yes"}}, metav1.CreateOptions{})
		return err
	})
}

// TestWebhookConfigurationValidation: invalid configurations are 422 with
// upstream's causes.
func TestWebhookConfigurationValidation(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	thirty1, url := int32(31), "http://example.com/x"
	_, err := env.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "short", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url}, TimeoutSeconds: &thirty1,
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"*", "CREATE"},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"*", "pods"}}}},
		}},
	}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want 422, got %v", err)
	}
	bad := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bad-cel"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "cel.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr("https://127.0.0.1:1/x")},
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "bad", Expression: "... [] bad expression"}},
		}},
	}
	if _, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "webhooks[0].matchConditions[0].expression") || !strings.Contains(err.Error(), "compilation failed") {
		t.Errorf("a matchCondition that does not compile: %v", err)
	}
	for _, want := range []string{
		"webhooks[0].name: Invalid value: \"short\": should be a domain with at least three segments separated by dots",
		"webhooks[0].sideEffects: Required value",
		"webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
		"webhooks[0].admissionReviewVersions: Required value",
		"webhooks[0].rules[0].operations: Invalid value",
		"if '*' is present, must not specify other resources without subresources",
		"webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in\n%v", want, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }
