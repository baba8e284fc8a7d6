package e2e

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDeploymentLifecycle applies, inspects, changes and deletes Deployments, then
// covers namespaces and the deletion of an unscheduled pod, on one cluster.
func TestDeploymentLifecycle(t *testing.T) {
	requireTools(t)
	t.Parallel()
	c := startCluster(t)

	t.Run("apply", func(t *testing.T) {
		manifest := writeFile(t, "web.yaml", deploymentManifest("web"))
		c.expectOutput(t, "deployment.apps/web created", "apply", "-f", manifest)
		c.expectOutput(t, "deployment.apps/web unchanged", "apply", "-f", manifest)
		if gen := c.jsonpath(t, "{.metadata.generation}", "deploy", "web"); gen != "1" {
			t.Errorf("a second, unchanged apply must be a no-op: metadata.generation = %q, want 1", gen)
		}
	})

	t.Run("get wide", func(t *testing.T) {
		// The controller manager of `up` creates the ReplicaSet and pods; with no kubelet
		// nothing becomes ready. Wait until the Deployment reports 3 up to date.
		var out string
		deadline := time.Now().Add(20 * time.Second)
		for {
			out = c.must(t, "get", "deploy", "-o", "wide")
			if r := tableRows(out); len(r) == 2 && len(r[1]) > 2 && r[1][2] == "3" || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		rows := tableRows(out)
		wantHeader := []string{"NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"}
		if len(rows) != 2 || !slices.Equal(rows[0], wantHeader) {
			t.Fatalf("kubectl get deploy -o wide: want the header %v and one row, got:\n%s", wantHeader, out)
		}
		row := rows[1]
		// No kubelet runs: the pods exist and are up to date, but none is ready or available.
		want := map[int]string{0: "web", 1: "0/3", 2: "3", 3: "0", 5: "nginx", 6: "nginx:1.27", 7: "app=web"}
		for i, w := range want {
			if len(row) != len(wantHeader) || row[i] != w {
				t.Errorf("kubectl get deploy -o wide: column %s = %q, want %q; output:\n%s", wantHeader[i], at(row, i), w, out)
			}
		}
		if len(row) == len(wantHeader) && !regexp.MustCompile(`^\d+s$`).MatchString(row[4]) {
			t.Errorf("kubectl get deploy -o wide: AGE = %q, want seconds; output:\n%s", row[4], out)
		}
	})

	t.Run("get yaml shows defaults", func(t *testing.T) {
		out := c.must(t, "get", "deploy", "web", "-o", "yaml")
		for _, want := range []string{
			"generation: 1",
			"progressDeadlineSeconds: 600",
			"revisionHistoryLimit: 10",
			"maxSurge: 25%",
			"maxUnavailable: 25%",
			"type: RollingUpdate",
			"imagePullPolicy: IfNotPresent",
			"terminationMessagePath: /dev/termination-log",
			"terminationMessagePolicy: File",
			"protocol: TCP",
			"restartPolicy: Always",
			"dnsPolicy: ClusterFirst",
			"schedulerName: default-scheduler",
			"terminationGracePeriodSeconds: 30",
			"securityContext: {}",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl get deploy web -o yaml lacks the defaulted %q; output:\n%s", want, out)
			}
		}
	})

	t.Run("describe", func(t *testing.T) {
		out := c.must(t, "describe", "deploy", "web")
		for _, re := range []string{
			`(?m)^Name:\s+web$`,
			`(?m)^Namespace:\s+default$`,
			`(?m)^Selector:\s+app=web$`,
			`(?m)^Replicas:\s+3 desired \| 3 updated \| 3 total \| 0 available \| 3 unavailable$`,
			`(?m)^StrategyType:\s+RollingUpdate$`,
			`(?m)^RollingUpdateStrategy:\s+25% max unavailable, 25% max surge$`,
			`(?m)^\s+Image:\s+nginx:1\.27$`,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("kubectl describe deploy web: no line matching %q; output:\n%s", re, out)
			}
		}
	})

	t.Run("mutate", func(t *testing.T) {
		c.expectOutput(t, "deployment.apps/api created", "apply", "-f", writeFile(t, "api.yaml", deploymentManifest("api")))
		gen := func() int {
			t.Helper()
			s := c.jsonpath(t, "{.metadata.generation}", "deploy", "api")
			n, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("metadata.generation of deploy/api = %q: %v", s, err)
			}
			return n
		}
		get := func(expr string) string { t.Helper(); return c.jsonpath(t, expr, "deploy", "api") }

		c.expectOutput(t, "deployment.apps/api labeled", "label", "deploy", "api", "tier=backend")
		if v := get("{.metadata.labels.tier}"); v != "backend" {
			t.Errorf("after kubectl label: labels.tier = %q, want backend", v)
		}
		c.expectOutput(t, "deployment.apps/api annotated", "annotate", "deploy", "api", "example.com/owner=team-a")
		if v := get(`{.metadata.annotations.example\.com/owner}`); v != "team-a" {
			t.Errorf("after kubectl annotate: annotation example.com/owner = %q, want team-a", v)
		}
		if g := gen(); g != 1 {
			t.Errorf("label and annotate must not bump metadata.generation: got %d, want 1", g)
		}

		before := gen()
		c.expectOutput(t, "deployment.apps/api scaled", "scale", "deploy", "api", "--replicas=5")
		if v := get("{.spec.replicas}"); v != "5" {
			t.Errorf("after kubectl scale --replicas=5: spec.replicas = %q, want 5", v)
		}
		if g := gen(); g <= before {
			t.Errorf("kubectl scale must bump metadata.generation: %d before, %d after", before, g)
		}

		// A strategic merge patch merges containers by name: a sidecar is added.
		containers := func() []string {
			t.Helper()
			return strings.Fields(get(`{range .spec.template.spec.containers[*]}{.name}={.image} {end}`))
		}
		before = gen()
		c.expectOutput(t, "deployment.apps/api patched", "patch", "deploy", "api",
			"-p", `{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.36"}]}}}}`)
		got := containers()
		sidecar := slices.Index(got, "sidecar=busybox:1.36")
		if len(got) != 2 || sidecar < 0 || !slices.Contains(got, "nginx=nginx:1.27") {
			t.Fatalf("after a strategic merge patch adding a sidecar, containers are %q, want nginx=nginx:1.27 and sidecar=busybox:1.36", got)
		}
		if g := gen(); g <= before {
			t.Errorf("a template change must bump metadata.generation: %d before, %d after", before, g)
		}

		// A JSON merge patch sets a field.
		c.expectOutput(t, "deployment.apps/api patched", "patch", "deploy", "api", "--type", "merge", "-p", `{"spec":{"minReadySeconds":7}}`)
		if v := get("{.spec.minReadySeconds}"); v != "7" {
			t.Errorf("after a merge patch: spec.minReadySeconds = %q, want 7", v)
		}

		// A JSON patch removes the sidecar by index and replaces the remaining image.
		c.expectOutput(t, "deployment.apps/api patched", "patch", "deploy", "api", "--type", "json", "-p",
			`[{"op":"remove","path":"/spec/template/spec/containers/`+strconv.Itoa(sidecar)+`"},{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.28"}]`)
		if got := containers(); !slices.Equal(got, []string{"nginx=nginx:1.28"}) {
			t.Errorf("after a JSON patch: containers are %q, want [nginx=nginx:1.28]", got)
		}

		// kubectl edit with an editor that changes one field in place.
		editor := []string{"KUBE_EDITOR=sed -i -e 's/minReadySeconds: 7/minReadySeconds: 11/'"}
		if r := c.kubectlEnv(t, editor, "edit", "deploy", "api"); r.err != nil || strings.TrimSpace(r.stdout) != "deployment.apps/api edited" {
			t.Fatalf("want stdout %q: %s", "deployment.apps/api edited", r)
		}
		if v := get("{.spec.minReadySeconds}"); v != "11" {
			t.Errorf("after kubectl edit: spec.minReadySeconds = %q, want 11", v)
		}
		if v := get("{.spec.replicas}"); v != "5" {
			t.Errorf("kubectl edit changed spec.replicas to %q, want it to stay 5", v)
		}
	})

	t.Run("delete", func(t *testing.T) {
		c.expectOutput(t, `deployment.apps "web" deleted`, "delete", "deploy", "web")
		r := c.mustFail(t, "get", "deploy", "web")
		if want := `Error from server (NotFound): deployments.apps "web" not found`; !strings.Contains(r.stderr, want) {
			t.Errorf("after delete, want %q: %s", want, r)
		}
		out := c.must(t, "get", "deploy")
		if rows := tableRows(out); len(rows) != 2 || rows[1][0] != "api" {
			t.Errorf("after deleting web only api must be left; kubectl get deploy:\n%s", out)
		}
	})

	t.Run("namespaces and unscheduled pods", func(t *testing.T) {
		c.expectOutput(t, "namespace/e2e-ns created", "create", "namespace", "e2e-ns")
		out := c.must(t, "get", "ns")
		rows := tableRows(out)
		if len(rows) == 0 || !slices.Equal(rows[0], []string{"NAME", "STATUS", "AGE"}) {
			t.Fatalf("kubectl get ns: want the header NAME STATUS AGE, got:\n%s", out)
		}
		status := map[string]string{}
		for _, r := range rows[1:] {
			if len(r) == 3 {
				status[r[0]] = r[1]
			}
		}
		for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease", "e2e-ns"} {
			if status[ns] != "Active" {
				t.Errorf("kubectl get ns: want namespace %s Active; output:\n%s", ns, out)
			}
		}

		pod := writeFile(t, "pod.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: lonely
  namespace: e2e-ns
spec:
  containers:
  - name: app
    image: busybox:1.36
    command: ["sleep", "3600"]
`)
		c.expectOutput(t, "pod/lonely created", "apply", "-f", pod)
		// No node runs it, so there is no kubelet to wait for: deletion is immediate
		// (kubectl delete waits for the pod to be gone, which would otherwise take 30 s).
		start := time.Now()
		c.expectOutput(t, `pod "lonely" deleted`, "delete", "pod", "lonely", "-n", "e2e-ns")
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("deleting an unscheduled pod took %s, want it immediate", d)
		}
		r := c.mustFail(t, "get", "pod", "lonely", "-n", "e2e-ns")
		if want := `Error from server (NotFound): pods "lonely" not found`; !strings.Contains(r.stderr, want) {
			t.Errorf("an unscheduled pod must be gone right after delete: want %q: %s", want, r)
		}
	})
}

// at is row[i], or "<missing>" when the row is too short.
func at(row []string, i int) string {
	if i < len(row) {
		return row[i]
	}
	return "<missing>"
}

// TestWatch runs `kubectl get -w --output-watch-events` and checks it sees configmaps
// come and go.
func TestWatch(t *testing.T) {
	requireTools(t)
	t.Parallel()
	c := startCluster(t)
	c.expectOutput(t, "namespace/watched created", "create", "namespace", "watched")
	// One object before the watch: its initial ADDED line shows the watch is running.
	c.expectOutput(t, "configmap/before created", "create", "configmap", "before", "-n", "watched", "--from-literal=k=v")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := c.kubectlCmd(ctx, nil, "get", "configmaps", "-n", "watched", "-w", "--output-watch-events")
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kubectl get -w: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cancel()
		<-exited
	}()

	expect := func(event, name string) {
		t.Helper()
		re := regexp.MustCompile(`(?m)^` + event + `\s+` + regexp.QuoteMeta(name) + `\s+\d+\s+\S+$`)
		if !poll(20*time.Second, func() bool { return re.MatchString(stdout.String()) }) {
			t.Fatalf("kubectl get configmaps -w --output-watch-events printed no %s line for %s (want a line matching %q) within 20 s\n--- stdout:\n%s--- stderr:\n%s",
				event, name, re, stdout.String(), stderr.String())
		}
	}
	expect("ADDED", "before")
	if h := regexp.MustCompile(`(?m)^EVENT\s+NAME\s+DATA\s+AGE$`); !h.MatchString(stdout.String()) {
		t.Errorf("kubectl get -w --output-watch-events: want the header EVENT NAME DATA AGE; stdout:\n%s", stdout.String())
	}

	c.expectOutput(t, "configmap/during created", "create", "configmap", "during", "-n", "watched", "--from-literal=a=1", "--from-literal=b=2")
	expect("ADDED", "during")
	c.expectOutput(t, `configmap "during" deleted`, "delete", "configmap", "during", "-n", "watched")
	expect("DELETED", "during")
	c.expectOutput(t, `configmap "before" deleted`, "delete", "configmap", "before", "-n", "watched")
	expect("DELETED", "before")

	if strings.Contains(stdout.String(), "MODIFIED") {
		t.Errorf("nothing was modified, but the watch printed a MODIFIED event:\n%s", stdout.String())
	}
	select {
	case err := <-exited:
		t.Fatalf("kubectl get -w ended by itself (%v)\n--- stdout:\n%s--- stderr:\n%s", err, stdout.String(), stderr.String())
	default:
	}
}

// TestDiscoveryAndExplain checks api-resources and explain, which read discovery and OpenAPI.
func TestDiscoveryAndExplain(t *testing.T) {
	requireTools(t)
	t.Parallel()
	c := startCluster(t)

	t.Run("api-resources", func(t *testing.T) {
		out := c.must(t, "api-resources")
		rows := tableRows(out)
		if len(rows) == 0 || !slices.Equal(rows[0], []string{"NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"}) {
			t.Fatalf("kubectl api-resources: want the header NAME SHORTNAMES APIVERSION NAMESPACED KIND, got:\n%s", out)
		}
		for _, want := range [][]string{
			{"pods", "po", "v1", "true", "Pod"},
			{"services", "svc", "v1", "true", "Service"},
			{"namespaces", "ns", "v1", "false", "Namespace"},
			{"configmaps", "cm", "v1", "true", "ConfigMap"},
			{"events", "ev", "v1", "true", "Event"},
			{"deployments", "deploy", "apps/v1", "true", "Deployment"},
			{"ingresses", "ing", "networking.k8s.io/v1", "true", "Ingress"},
			{"endpointslices", "discovery.k8s.io/v1", "true", "EndpointSlice"},
			{"leases", "coordination.k8s.io/v1", "true", "Lease"},
			{"events", "ev", "events.k8s.io/v1", "true", "Event"},
		} {
			if !slices.ContainsFunc(rows, func(r []string) bool { return slices.Equal(r, want) }) {
				t.Errorf("kubectl api-resources has no row %v; output:\n%s", want, out)
			}
		}

		out = c.must(t, "api-resources", "--api-group=apps", "-o", "name")
		for _, want := range []string{"deployments.apps", "replicasets.apps"} {
			if !slices.Contains(strings.Fields(out), want) {
				t.Errorf("kubectl api-resources --api-group=apps -o name lacks %s; output:\n%s", want, out)
			}
		}
	})

	t.Run("explain", func(t *testing.T) {
		out := c.must(t, "explain", "deployment.spec")
		for _, re := range []string{
			`(?m)^GROUP:\s+apps$`,
			`(?m)^KIND:\s+Deployment$`,
			`(?m)^VERSION:\s+v1$`,
			`(?m)^FIELD:\s+spec\s+<DeploymentSpec>$`,
			`(?m)^\s+replicas\s+<integer>$`,
			// Upstream marks both -required-; kubette's documents carry no required
			// lists (see internal/openapi), so the marker is optional here.
			`(?m)^\s+selector\s+<LabelSelector>( -required-)?$`,
			`(?m)^\s+template\s+<PodTemplateSpec>( -required-)?$`,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("kubectl explain deployment.spec: no line matching %q; output:\n%s", re, out)
			}
		}

		out = c.must(t, "explain", "deployment.spec.replicas")
		if !strings.Contains(out, "Number of desired pods") {
			t.Errorf("kubectl explain deployment.spec.replicas lacks the field's description; output:\n%s", out)
		}
	})
}

// TestServerValidationErrors checks that kubectl prints the server's errors for bad manifests.
func TestServerValidationErrors(t *testing.T) {
	requireTools(t)
	t.Parallel()
	c := startCluster(t)

	cases := []struct {
		name, manifest string
		want           []string // in kubectl's stderr
	}{{
		name: "invalid name",
		manifest: `apiVersion: v1
kind: ConfigMap
metadata:
  name: Bad_Name
data:
  k: v
`,
		want: []string{`The ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of`},
	}, {
		name: "unknown field",
		manifest: `apiVersion: v1
kind: ConfigMap
metadata:
  name: unknown-field
bogus: true
data:
  k: v
`,
		want: []string{`Error from server (BadRequest)`, `strict decoding error: unknown field "bogus"`},
	}, {
		name: "selector does not match template",
		manifest: strings.Replace(deploymentManifest("mismatch"), `      labels:
        app: mismatch
    spec:`, `      labels:
        app: other
    spec:`, 1),
		want: []string{`The Deployment "mismatch" is invalid:`, "spec.template.metadata.labels: Invalid value", "`selector` does not match template `labels`"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, "bad.yaml", tc.manifest)
			for _, verb := range []string{"create", "apply"} {
				r := c.kubectl(t, verb, "-f", file)
				if r.err == nil {
					t.Errorf("the server accepted a bad manifest (want it rejected with %q): %s", tc.want, r)
					continue
				}
				for _, want := range tc.want {
					if !strings.Contains(r.stderr, want) {
						t.Errorf("want %q in kubectl's error: %s", want, r)
					}
				}
			}
		})
	}
}
