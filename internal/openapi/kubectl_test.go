package openapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const kubectlPath = "/usr/bin/kubectl"

// fakeAPIServer serves the OpenAPI documents, the legacy discovery
// endpoints kubectl's RESTMapper needs, and a tiny in-memory store for one
// resource collection so that create/apply can run. It records every request.
type fakeAPIServer struct {
	docs      *Documents
	resources []Resource
	url       string
	v2        bool // serve /openapi/v2 (as kube-apiserver does)

	mu       sync.Mutex
	requests []recordedRequest
	objects  map[string][]byte // by item path
}

type recordedRequest struct {
	method, path, query, contentType string
}

func (s *fakeAPIServer) record(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, recordedRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type")})
}

func (s *fakeAPIServer) recorded() []recordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recordedRequest(nil), s.requests...)
}

func writeTestJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func notFound(w http.ResponseWriter, what string) {
	writeTestJSON(w, http.StatusNotFound, metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound,
		Message: what + " not found",
	})
}

func (s *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.record(r)
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/openapi/v3"):
		s.docs.ServeHTTP(w, r)
	case p == "/openapi/v2" && s.v2:
		s.docs.ServeV2(w, r)
	case p == "/version":
		writeTestJSON(w, http.StatusOK, map[string]string{
			"major": "1", "minor": "32", "gitVersion": "v1.32.0", "platform": "linux/amd64",
		})
	case p == "/api":
		writeTestJSON(w, http.StatusOK, metav1.APIVersions{
			TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
			Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
				{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host},
			},
		})
	case p == "/apis":
		writeTestJSON(w, http.StatusOK, s.groupList())
	case p == "/api/v1" || strings.Count(p, "/") == 3 && strings.HasPrefix(p, "/apis/"):
		gv := schema.GroupVersion{Version: "v1"}
		if p != "/api/v1" {
			parts := strings.Split(p, "/")
			gv = schema.GroupVersion{Group: parts[2], Version: parts[3]}
		}
		list, ok := s.resourceList(gv)
		if !ok {
			notFound(w, p)
			return
		}
		writeTestJSON(w, http.StatusOK, list)
	case strings.HasPrefix(p, "/apis/apps/v1/namespaces/default/deployments"):
		s.serveDeployments(w, r)
	default:
		notFound(w, p)
	}
}

// serveDeployments is just enough of a REST store for kubectl create/apply.
func (s *fakeAPIServer) serveDeployments(w http.ResponseWriter, r *http.Request) {
	const collection = "/apis/apps/v1/namespaces/default/deployments"
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == collection:
		var obj map[string]any
		if err := json.Unmarshal(body, &obj); err != nil {
			writeTestJSON(w, http.StatusBadRequest, map[string]string{"kind": "Status", "message": err.Error()})
			return
		}
		meta, _ := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		meta["namespace"] = "default"
		meta["uid"] = "6f2b3c1e-0000-4000-8000-000000000001"
		meta["resourceVersion"] = "1"
		stored, _ := json.Marshal(obj)
		if r.URL.Query().Get("dryRun") == "" {
			s.objects[collection+"/"+name] = stored
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(stored)
	case r.Method == http.MethodGet || r.Method == http.MethodPatch:
		stored, ok := s.objects[r.URL.Path]
		if !ok {
			notFound(w, r.URL.Path)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(stored)
	default:
		notFound(w, r.URL.Path)
	}
}

func defaultVerbs() metav1.Verbs {
	return metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
}

func (s *fakeAPIServer) groupList() *metav1.APIGroupList {
	out := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	seen := map[string]bool{}
	for _, r := range s.resources {
		gv := r.GVK.GroupVersion()
		if gv.Group == "" || seen[gv.String()] {
			continue
		}
		seen[gv.String()] = true
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		out.Groups = append(out.Groups, metav1.APIGroup{Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v})
	}
	return out
}

func (s *fakeAPIServer) resourceList(gv schema.GroupVersion) (*metav1.APIResourceList, bool) {
	out := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	found := false
	for _, r := range s.resources {
		if r.GVK.GroupVersion() != gv {
			continue
		}
		found = true
		verbs := defaultVerbs()
		if len(r.Verbs) > 0 {
			verbs = r.Verbs
		}
		out.APIResources = append(out.APIResources, metav1.APIResource{
			Name: r.Plural, Namespaced: r.Namespaced, Kind: r.GVK.Kind, Verbs: verbs,
		})
		for _, sub := range r.Subresources {
			ar := metav1.APIResource{Name: r.Plural + "/" + sub, Namespaced: r.Namespaced, Kind: r.GVK.Kind, Verbs: metav1.Verbs{"get", "patch", "update"}}
			if sub == "scale" {
				ar.Group, ar.Version, ar.Kind = "autoscaling", "v1", "Scale"
			}
			out.APIResources = append(out.APIResources, ar)
		}
	}
	return out, found
}

// kubectlEnv prepares a kubeconfig for server and an isolated HOME and
// discovery cache, and returns a function running kubectl with them.
func kubectlEnv(t *testing.T, serverURL string) func(args ...string) (string, error) {
	t.Helper()
	if _, err := os.Stat(kubectlPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required in CI: %v", kubectlPath, err)
		}
		t.Skipf("skipping: the real kubectl is not installed at %s (%v)", kubectlPath, err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	config := `apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: ` + serverURL + `
contexts:
- name: test
  context:
    cluster: test
    user: test
    namespace: default
current-context: test
users:
- name: test
  user: {}
`
	if err := os.WriteFile(kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"HOME=" + dir,
		"KUBECACHEDIR=" + filepath.Join(dir, "cache"),
		"PATH=" + os.Getenv("PATH"),
	}
	return func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kubectlPath, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Env = env
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

func startFakeAPIServer(t *testing.T) *fakeAPIServer {
	t.Helper()
	resources := testResources()
	docs, err := Build(resources)
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeAPIServer{docs: docs, resources: resources, objects: map[string][]byte{}}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	fake.url = srv.URL
	return fake
}

func assertContains(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q; got:\n%s", want, out)
		}
	}
}

func TestKubectlExplain(t *testing.T) {
	fake := startFakeAPIServer(t)
	kubectl := kubectlEnv(t, fake.url)

	out, err := kubectl("explain", "deployment.spec")
	if err != nil {
		t.Fatalf("kubectl explain deployment.spec: %v\n%s", err, out)
	}
	assertContains(t, out,
		"GROUP:      apps", "KIND:       Deployment", "VERSION:    v1",
		"FIELD: spec <DeploymentSpec>", "DESCRIPTION:",
		"DeploymentSpec is the specification of the desired behavior of the",
		"FIELDS:", "replicas\t<integer>", "Number of desired pods.",
		"selector\t<LabelSelector>", "template\t<PodTemplateSpec>", "strategy\t<DeploymentStrategy>")

	out, err = kubectl("explain", "pods.spec.containers.resources")
	if err != nil {
		t.Fatalf("kubectl explain pods.spec.containers.resources: %v\n%s", err, out)
	}
	assertContains(t, out,
		"KIND:       Pod", "VERSION:    v1",
		"FIELD: resources <ResourceRequirements>", "DESCRIPTION:",
		"Compute Resources required by this container.",
		"limits\t<map[string]Quantity>", "requests\t<map[string]Quantity>", "claims\t<[]ResourceClaim>")

	out, err = kubectl("explain", "pods.metadata")
	if err != nil {
		t.Fatalf("kubectl explain pods.metadata: %v\n%s", err, out)
	}
	assertContains(t, out,
		"FIELD: metadata <ObjectMeta>",
		"ObjectMeta is metadata that all persisted resources must have",
		"creationTimestamp\t<string>", "labels\t<map[string]string>", "ownerReferences\t<[]OwnerReference>")

	out, err = kubectl("explain", "deployments.spec.strategy.rollingUpdate.maxSurge")
	if err != nil {
		t.Fatalf("kubectl explain maxSurge: %v\n%s", err, out)
	}
	assertContains(t, out, "FIELD: maxSurge <IntOrString>", "IntOrString is a value")

	out, err = kubectl("explain", "jobs", "--recursive")
	if err != nil {
		t.Fatalf("kubectl explain jobs --recursive: %v\n%s", err, out)
	}
	assertContains(t, out, "GROUP:      batch", "KIND:       Job", "backoffLimit\t<integer>", "containers\t<[]Container>")

	for _, r := range fake.recorded() {
		if strings.HasPrefix(r.path, "/openapi/v2") {
			t.Errorf("kubectl explain fell back to OpenAPI v2: %+v", r)
		}
	}
}

// TestKubectlCreateAndApply checks kubectl's use of the PATCH operations:
// server-side field validation must be detected from the v3 document (no
// client-side validation against /openapi/v2), and client-side apply must
// fall back to a strategic merge patch built from kubectl's Go types.
func TestKubectlCreateAndApply(t *testing.T) {
	fake := startFakeAPIServer(t)
	fake.v2 = true
	kubectl := kubectlEnv(t, fake.url)
	manifest := func(replicas string) string {
		return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: ` + replicas + `
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx
        resources:
          limits: {cpu: 500m, memory: 128Mi}
`
	}
	file := filepath.Join(t.TempDir(), "deploy.yaml")
	write := func(replicas string) {
		if err := os.WriteFile(file, []byte(manifest(replicas)), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	write("1")
	out, err := kubectl("create", "-f", file, "--validate=strict", "--dry-run=server", "-o", "name")
	if err != nil {
		t.Fatalf("kubectl create --dry-run=server: %v\n%s", err, out)
	}
	assertContains(t, out, "deployment.apps/web")
	for _, r := range fake.recorded() {
		if strings.HasPrefix(r.path, "/openapi/v2") {
			t.Errorf("kubectl create fetched OpenAPI v2 (client-side validation fallback): %+v", r)
		}
	}

	out, err = kubectl("apply", "-f", file)
	if err != nil {
		t.Fatalf("first kubectl apply: %v\n%s", err, out)
	}
	assertContains(t, out, "deployment.apps/web created")

	write("3")
	out, err = kubectl("apply", "-f", file)
	if err != nil {
		t.Fatalf("second kubectl apply: %v\n%s", err, out)
	}
	assertContains(t, out, "deployment.apps/web")

	var sawStrictCreate, sawPatch bool
	for _, r := range fake.recorded() {
		// Client-side apply may ask /openapi/v2 for patch metadata once the v3
		// document declines strategic merge patches (the v2 document carries the
		// Go types' patch strategies and merge keys); either way it must send a
		// strategic merge patch.
		switch {
		case r.method == http.MethodPost && strings.HasSuffix(r.path, "/deployments"):
			if strings.Contains(r.query, "fieldValidation=Strict") {
				sawStrictCreate = true
			}
		case r.method == http.MethodPatch:
			sawPatch = true
			if r.contentType != "application/strategic-merge-patch+json" {
				t.Errorf("apply patched with %q, want application/strategic-merge-patch+json", r.contentType)
			}
		}
	}
	if !sawStrictCreate {
		t.Errorf("no create request carried fieldValidation=Strict; requests: %+v", fake.recorded())
	}
	if !sawPatch {
		t.Errorf("second apply sent no PATCH; requests: %+v", fake.recorded())
	}
}

// TestKubectlCreateList: kubectl validates a kind: List file against /openapi/v2 (the
// List kind has no v3 document), so creating one needs the v2 document; an unknown
// kind then gets kubectl's usual message.
func TestKubectlCreateList(t *testing.T) {
	fake := startFakeAPIServer(t)
	fake.v2 = true
	kubectl := kubectlEnv(t, fake.url)
	dir := t.TempDir()
	deployment := func(name string) string {
		return `  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: ` + name + `}
    spec:
      selector: {matchLabels: {app: ` + name + `}}
      template:
        metadata: {labels: {app: ` + name + `}}
        spec: {containers: [{name: c, image: busybox}]}
`
	}
	list := filepath.Join(dir, "list.yaml")
	if err := os.WriteFile(list, []byte("apiVersion: v1\nkind: List\nitems:\n"+deployment("a")+deployment("b")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := kubectl("create", "-f", list, "-o", "name")
	if err != nil {
		t.Fatalf("kubectl create -f list.yaml: %v\n%s", err, out)
	}
	assertContains(t, out, "deployment.apps/a", "deployment.apps/b")

	unknown := filepath.Join(dir, "unknown.yaml")
	if err := os.WriteFile(unknown, []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = kubectl("create", "-f", unknown)
	if err == nil {
		t.Fatalf("kubectl create of an unknown kind succeeded:\n%s", out)
	}
	assertContains(t, out, `no matches for kind "Widget" in version "example.com/v1"`)
}
