package apiserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/trace"
)

// get makes a GET as user (anonymous when empty) with extra headers, and returns the
// answer with its body read.
func get(t testing.TB, url, user string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("X-Test-User", user)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// status decodes a metav1.Status answer.
func status(t *testing.T, body string) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Kind != "Status" {
		t.Fatalf("not a Status (%v): %s", err, body)
	}
	return st
}

func createWeb(t testing.TB, c kubernetes.Interface) *appsv1.Deployment {
	t.Helper()
	labels := map[string]string{"app": "web"}
	d, err := c.AppsV1().Deployments("default").Create(context.Background(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "busybox:local"}}},
			},
		},
	}, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestUIPage(t *testing.T) {
	hs, _ := traceServer(t, 0)
	resp, _ := get(t, hs.URL+"/ui", "admin")
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "ui/" {
		t.Errorf("GET /ui: %d Location %q, want 301 to ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body := get(t, hs.URL+"/ui/", "admin")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(body, `<script src="ui.js"`) || !strings.Contains(body, `id="diagram"`) {
		t.Errorf("GET /ui/: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	for file, typ := range map[string]string{"ui.js": "text/javascript", "ui.css": "text/css"} {
		resp, body := get(t, hs.URL+"/ui/"+file, "admin")
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), typ) || len(body) < 100 {
			t.Errorf("GET /ui/%s: %d %s, %d bytes", file, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
	}
	// Nothing of it is reachable without credentials.
	for _, p := range []string{"/ui", "/ui/", "/ui/ui.js", "/ui/api/trace?kind=pod&namespace=default&name=x"} {
		if resp, body := get(t, hs.URL+p, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("anonymous GET %s: %d %s", p, resp.StatusCode, body)
		}
	}
	if resp, body := get(t, hs.URL+"/ui/nothing-here", "admin"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /ui/nothing-here: %d %s", resp.StatusCode, body)
	}
	if resp, body := get(t, hs.URL+"/ui/api/other", "admin"); resp.StatusCode != http.StatusNotFound || status(t, body).Code != 404 {
		t.Errorf("GET /ui/api/other: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/ui/api/trace", strings.NewReader("{}"))
	req.Header.Set("X-Test-User", "admin")
	post, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(post.Body)
	post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed || status(t, string(b)).Reason != metav1.StatusReasonMethodNotAllowed {
		t.Errorf("POST /ui/api/trace: %d %s", post.StatusCode, b)
	}
}

func TestUITrace(t *testing.T) {
	hs, client := traceServer(t, 0)
	kubectl := client("admin", "kubectl/v1.32.0 (linux/amd64) kubernetes/test")
	d := createWeb(t, kubectl)
	url := hs.URL + "/ui/api/trace?kind=deploy&namespace=default&name=web"

	resp, body := get(t, url, "admin")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Fatalf("GET trace: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	for _, want := range []string{"<svg ", ">kubectl<", ">" + trace.APIServer + "<", ">" + trace.Etcd + "<", "POST /apis/apps/v1/namespaces/default/deployments → 201", "create /registry/deployments/default/web"} {
		if !strings.Contains(body, want) {
			t.Errorf("SVG lacks %q:\n%s", want, body)
		}
	}
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}

	// An unchanged diagram: 304 and no body, also after reads, which the diagram leaves out.
	if _, err := kubectl.AppsV1().Deployments("default").Get(context.Background(), "web", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if resp, body := get(t, url, "admin", "If-None-Match", etag); resp.StatusCode != http.StatusNotModified || body != "" {
		t.Errorf("GET trace If-None-Match: %d %q, want 304", resp.StatusCode, body)
	}
	// The page's own reads are not in the trace: asking again changes nothing.
	if resp, _ := get(t, url, "admin"); resp.Header.Get("ETag") != etag {
		t.Errorf("ETag changed from %s to %s with no change in the cluster", etag, resp.Header.Get("ETag"))
	}
	raw, err := kubectl.CoreV1().RESTClient().Get().AbsPath(trace.Endpoint).Param("namespace", "default").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var recs trace.Response
	if err := json.Unmarshal(raw, &recs); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs.Records {
		if r.UserAgent == "kubette-ui" {
			t.Errorf("the page's read was recorded: %+v", r)
		}
	}

	// A ReplicaSet owned by the Deployment: a new ETag and its create in the diagram.
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-5d9c", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
	rsClient := client("system:kube-controller-manager", "kubette/v0 (linux/amd64) kubernetes/x/kube-controller-manager")
	if _, err := rsClient.AppsV1().ReplicaSets("default").Create(context.Background(), rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	resp, body = get(t, url, "admin", "If-None-Match", etag)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == etag {
		t.Fatalf("after a ReplicaSet create: %d ETag %s (was %s)", resp.StatusCode, resp.Header.Get("ETag"), etag)
	}
	if !strings.Contains(body, "POST /apis/apps/v1/namespaces/default/replicasets → 201") || !strings.Contains(body, ">deployment-controller<") {
		t.Errorf("SVG lacks the ReplicaSet create by the deployment controller:\n%s", body)
	}

	// The same diagram as Mermaid and text, as downloads.
	resp, body = get(t, url+"&format=mermaid&download=1", "admin")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") ||
		resp.Header.Get("Content-Disposition") != `attachment; filename="deployment-web.mmd"` || !strings.HasPrefix(body, "sequenceDiagram\n") {
		t.Errorf("mermaid download: %d %v\n%s", resp.StatusCode, resp.Header, body)
	}
	if err := trace.CheckMermaid(body); err != nil {
		t.Errorf("mermaid: %v\n%s", err, body)
	}
	resp, body = get(t, url+"&format=text&all=true", "admin")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "POST /apis/apps/v1/namespaces/default/deployments → 201") || resp.Header.Get("Content-Disposition") != "" {
		t.Errorf("text: %d %v\n%s", resp.StatusCode, resp.Header, body)
	}
}

func TestUITraceErrors(t *testing.T) {
	hs, _ := traceServer(t, 0)
	for _, c := range []struct {
		query  string
		code   int
		reason metav1.StatusReason
		msg    string
	}{
		{"kind=deployment&namespace=default&name=nothing", 404, metav1.StatusReasonNotFound, `get deployment default/nothing: deployments.apps "nothing" not found`},
		{"kind=cronjob&namespace=default&name=x", 400, metav1.StatusReasonBadRequest, `kind "cronjob"`},
		{"kind=pod&namespace=default", 400, metav1.StatusReasonBadRequest, "namespace and name are required"},
		{"kind=pod&namespace=default&name=x&format=png", 400, metav1.StatusReasonBadRequest, `format "png"`},
	} {
		resp, body := get(t, hs.URL+"/ui/api/trace?"+c.query, "admin")
		st := status(t, body)
		if resp.StatusCode != c.code || st.Code != int32(c.code) || st.Reason != c.reason || !strings.Contains(st.Message, c.msg) {
			t.Errorf("%s: %d %+v, want %d %s %q", c.query, resp.StatusCode, st, c.code, c.reason, c.msg)
		}
	}
}

// noPods refuses one user every pod request.
type noPods struct{ user string }

func (n noPods) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.User != nil && a.User.Name == n.user && a.Resource == "pods" {
		return authorizer.NoOpinion, "no pods for you", nil
	}
	return authorizer.Authenticated{}.Authorize(ctx, a)
}

// The diagram's reads are authorized as the user who asked for the page.
func TestUITraceAuthorizesAsTheUser(t *testing.T) {
	hs, client := authzServer(t, 0, noPods{user: "viewer"})
	createWeb(t, client("admin", "kubectl"))
	url := hs.URL + "/ui/api/trace?kind=deployment&namespace=default&name=web"
	if resp, body := get(t, url, "admin"); resp.StatusCode != http.StatusOK {
		t.Errorf("admin: %d %s", resp.StatusCode, body)
	}
	resp, body := get(t, url, "viewer")
	if st := status(t, body); resp.StatusCode != http.StatusForbidden || st.Reason != metav1.StatusReasonForbidden || !strings.Contains(st.Message, "no pods for you") {
		t.Errorf("viewer: %d %+v", resp.StatusCode, st)
	}
}

func TestUITraceOff(t *testing.T) {
	hs, client := traceServer(t, -1)
	createWeb(t, client("admin", "kubectl"))
	resp, body := get(t, hs.URL+"/ui/api/trace?kind=deployment&namespace=default&name=web", "admin")
	if st := status(t, body); resp.StatusCode != http.StatusNotFound || !strings.Contains(st.Message, "tracing is off") {
		t.Errorf("tracing off: %d %+v", resp.StatusCode, st)
	}
	if resp, _ := get(t, hs.URL+"/ui/", "admin"); resp.StatusCode != http.StatusOK {
		t.Errorf("page with tracing off: %d", resp.StatusCode)
	}
}

// BenchmarkUITracePoll measures one poll of the page's diagram for a Deployment with a
// ReplicaSet and three pods: collecting through the in-process client, rendering the
// SVG, and answering 304 (the page's steady state) or 200 with the SVG. cpu-ms/op is
// the process's CPU time (server and client together) per poll, a figure that holds
// on a loaded machine.
func BenchmarkUITracePoll(b *testing.B) {
	hs, client := traceServer(b, 0)
	kubectl := client("admin", "kubectl/v1.32.0 (linux/amd64) kubernetes/test")
	d := createWeb(b, kubectl)
	ctx := context.Background()
	rsClient := client("system:kube-controller-manager", "kubette/v0 (linux/amd64) kubernetes/x/kube-controller-manager")
	rs, err := rsClient.AppsV1().ReplicaSets("default").Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-5d9c", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: d.Spec.Selector, Template: d.Spec.Template},
	}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := rsClient.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "web-5d9c-", Labels: map[string]string{"app": "web"}, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
			Spec: d.Spec.Template.Spec,
		}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	url := hs.URL + "/ui/api/trace?kind=deployment&namespace=default&name=web"
	resp, _ := get(b, url, "admin")
	etag := resp.Header.Get("ETag")
	for _, c := range []struct {
		name   string
		header []string
		code   int
	}{{"unchanged", []string{"If-None-Match", etag}, http.StatusNotModified}, {"changed", nil, http.StatusOK}} {
		b.Run(c.name, func(b *testing.B) {
			before := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if resp, body := get(b, url, "admin", c.header...); resp.StatusCode != c.code {
					b.Fatalf("%d %s", resp.StatusCode, body)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-before)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}
