package bootstrap

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// dumper prints upstream's bootstrap objects as JSON. It is built in a module of its own
// against k8s.io/apiserver v0.32.13 from the module cache (no network), since this
// module's k8s.io/api is newer than that apiserver.
const dumper = `package main

import (
	"encoding/json"
	"os"

	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
)

func main() {
	_ = json.NewEncoder(os.Stdout).Encode(map[string]interface{}{
		"mandatoryPL": bootstrap.MandatoryPriorityLevelConfigurations,
		"suggestedPL": bootstrap.SuggestedPriorityLevelConfigurations,
		"mandatoryFS": bootstrap.MandatoryFlowSchemas,
		"suggestedFS": bootstrap.SuggestedFlowSchemas,
	})
}
`

type upstreamSet struct {
	MandatoryPL []*flowcontrolv1.PriorityLevelConfiguration `json:"mandatoryPL"`
	SuggestedPL []*flowcontrolv1.PriorityLevelConfiguration `json:"suggestedPL"`
	MandatoryFS []*flowcontrolv1.FlowSchema                 `json:"mandatoryFS"`
	SuggestedFS []*flowcontrolv1.FlowSchema                 `json:"suggestedFS"`
}

func upstream(t *testing.T) upstreamSet {
	t.Helper()
	home, _ := os.UserHomeDir()
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		gopath = filepath.Join(home, "go")
	}
	if _, err := os.Stat(filepath.Join(gopath, "pkg/mod/k8s.io/apiserver@v0.32.13/pkg/apis/flowcontrol/bootstrap")); err != nil {
		t.Skipf("k8s.io/apiserver v0.32.13 is not in the module cache: nothing to compare with")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(dumper), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module apfdump\n\ngo 1.23\n\nrequire k8s.io/apiserver v0.32.13\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("build upstream's bootstrap dumper: %v\n%s", err, stderr.String())
		}
		t.Skipf("cannot build upstream's bootstrap dumper offline: %v\n%s", err, stderr.String())
	}
	var set upstreamSet
	if err := json.Unmarshal(out, &set); err != nil {
		t.Fatal(err)
	}
	return set
}

func TestMatchesUpstream(t *testing.T) {
	up := upstream(t)
	compare(t, "mandatory priority levels", up.MandatoryPL, MandatoryPriorityLevelConfigurations())
	compare(t, "suggested priority levels", up.SuggestedPL, SuggestedPriorityLevelConfigurations())
	compare(t, "mandatory flow schemas", up.MandatoryFS, MandatoryFlowSchemas())
	compare(t, "suggested flow schemas", up.SuggestedFS, SuggestedFlowSchemas())
}

func compare[T any](t *testing.T, what string, want, got []T) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d objects, upstream has %d", what, len(got), len(want))
	}
	for i := range want {
		if !apiequality.Semantic.DeepEqual(want[i], got[i]) {
			w, _ := json.Marshal(want[i])
			g, _ := json.Marshal(got[i])
			t.Errorf("%s #%d differs:\nupstream %s\nours     %s", what, i, w, g)
		}
	}
}

func TestEnsure(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	fc := client.FlowcontrolV1()
	if err := Ensure(ctx, fc); err != nil {
		t.Fatal(err)
	}
	fsl, _ := fc.FlowSchemas().List(ctx, metav1.ListOptions{})
	pll, _ := fc.PriorityLevelConfigurations().List(ctx, metav1.ListOptions{})
	if len(fsl.Items) != 13 || len(pll.Items) != 8 {
		t.Fatalf("%d flow schemas and %d priority levels, want 13 and 8", len(fsl.Items), len(pll.Items))
	}

	// A suggested object whose annotation says false keeps the user's spec.
	gd, _ := fc.FlowSchemas().Get(ctx, "global-default", metav1.GetOptions{})
	gd.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] = "false"
	gd.Spec.MatchingPrecedence = 9800
	if _, err := fc.FlowSchemas().Update(ctx, gd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A suggested object whose annotation says true is restored.
	sys, _ := fc.PriorityLevelConfigurations().Get(ctx, "system", metav1.GetOptions{})
	sys.Spec.Limited.NominalConcurrencyShares = ptr(1)
	if _, err := fc.PriorityLevelConfigurations().Update(ctx, sys, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A mandatory object is restored whatever its annotation says.
	ca, _ := fc.FlowSchemas().Get(ctx, CatchAll, metav1.GetOptions{})
	ca.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] = "false"
	ca.Spec.MatchingPrecedence = 9999
	if _, err := fc.FlowSchemas().Update(ctx, ca, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An old bootstrap object (annotated true, no longer wanted) goes; a user's stays.
	for name, ann := range map[string]map[string]string{"retired": {flowcontrolv1.AutoUpdateAnnotationKey: "true"}, "mine": nil} {
		if _, err := fc.FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := Ensure(ctx, fc); err != nil {
		t.Fatal(err)
	}
	if gd, _ := fc.FlowSchemas().Get(ctx, "global-default", metav1.GetOptions{}); gd.Spec.MatchingPrecedence != 9800 {
		t.Errorf("global-default with autoupdate false was restored: %d", gd.Spec.MatchingPrecedence)
	}
	if sys, _ := fc.PriorityLevelConfigurations().Get(ctx, "system", metav1.GetOptions{}); *sys.Spec.Limited.NominalConcurrencyShares != 30 {
		t.Errorf("system with autoupdate true was not restored: %d", *sys.Spec.Limited.NominalConcurrencyShares)
	}
	ca, _ = fc.FlowSchemas().Get(ctx, CatchAll, metav1.GetOptions{})
	if ca.Spec.MatchingPrecedence != 10000 || ca.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] != "true" {
		t.Errorf("catch-all not restored: %d %v", ca.Spec.MatchingPrecedence, ca.Annotations)
	}
	if _, err := fc.FlowSchemas().Get(ctx, "retired", metav1.GetOptions{}); err == nil {
		t.Error("retired bootstrap flow schema kept")
	}
	if _, err := fc.FlowSchemas().Get(ctx, "mine", metav1.GetOptions{}); err != nil {
		t.Errorf("user's flow schema deleted: %v", err)
	}
}
