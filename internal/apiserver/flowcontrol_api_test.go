package apiserver_test

import (
	"encoding/json"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubette/kubette/internal/testenv"
)

// TestFlowControlAPI drives flowcontrol.apiserver.k8s.io/v1 through client-go: the
// bootstrap configuration exists at start, defaults and validation are upstream's, a
// mandatory object's spec is fixed, the status subresource changes only the status,
// and tables have upstream's columns.
func TestFlowControlAPI(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := ctxT(t)
	fc := env.Client.FlowcontrolV1()

	res, err := env.Client.Discovery().ServerResourcesForGroupVersion("flowcontrol.apiserver.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, r := range res.APIResources {
		have[r.Name] = true
		if r.Name == "flowschemas" && r.Namespaced {
			t.Error("flowschemas are namespaced in discovery")
		}
	}
	for _, n := range []string{"flowschemas", "flowschemas/status", "prioritylevelconfigurations", "prioritylevelconfigurations/status"} {
		if !have[n] {
			t.Errorf("discovery lacks %s: %v", n, have)
		}
	}

	fsl, err := fc.FlowSchemas().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pll, err := fc.PriorityLevelConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fsl.Items) != 13 || len(pll.Items) != 8 {
		t.Fatalf("bootstrap: %d flow schemas, %d priority levels; want 13 and 8", len(fsl.Items), len(pll.Items))
	}

	// Defaults: precedence 1000; a Limited level's shares 30, queuing 64/8/50.
	fs, err := fc.FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "mine"},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:         []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "bob"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"/version"}}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fs.Spec.MatchingPrecedence != 1000 || fs.Generation != 1 {
		t.Errorf("defaults: precedence %d generation %d", fs.Spec.MatchingPrecedence, fs.Generation)
	}
	pl, err := fc.PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{LimitResponse: flowcontrolv1.LimitResponse{
				Type: flowcontrolv1.LimitResponseTypeQueue, Queuing: &flowcontrolv1.QueuingConfiguration{}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := pl.Spec.Limited; *l.NominalConcurrencyShares != 30 || *l.LendablePercent != 0 || l.LimitResponse.Queuing.Queues != 64 ||
		l.LimitResponse.Queuing.HandSize != 8 || l.LimitResponse.Queuing.QueueLengthLimit != 50 {
		t.Errorf("priority level defaults: %+v %+v", l, l.LimitResponse.Queuing)
	}

	// Validation: 422s naming the field.
	bad := []struct {
		name string
		obj  *flowcontrolv1.PriorityLevelConfiguration
		fs   *flowcontrolv1.FlowSchema
	}{
		{name: "hand larger than queues", obj: &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "x"},
			Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
				Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{LimitResponse: flowcontrolv1.LimitResponse{
					Type: flowcontrolv1.LimitResponseTypeQueue, Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 4, HandSize: 5}}}}}},
		{name: "exempt type on another name", obj: &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "x"},
			Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementExempt}}},
		{name: "precedence 1", fs: &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "x"},
			Spec: flowcontrolv1.FlowSchemaSpec{MatchingPrecedence: 1, PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "a"}}}},
		{name: "no subjects", fs: &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "x"},
			Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "a"},
				Rules: []flowcontrolv1.PolicyRulesWithSubjects{{NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"bad*"}}}}}}}},
	}
	for _, b := range bad {
		var err error
		if b.obj != nil {
			_, err = fc.PriorityLevelConfigurations().Create(ctx, b.obj, metav1.CreateOptions{})
		} else {
			_, err = fc.FlowSchemas().Create(ctx, b.fs, metav1.CreateOptions{})
		}
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: %v, want 422", b.name, err)
		}
	}

	// The mandatory catch-all's spec is fixed; its annotations are not.
	ca, err := fc.FlowSchemas().Get(ctx, "catch-all", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca.Spec.MatchingPrecedence = 9000
	if _, err := fc.FlowSchemas().Update(ctx, ca, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("catch-all spec change: %v, want 422", err)
	}

	// Status: a patch through the subresource keeps the spec.
	st, err := fc.FlowSchemas().Patch(ctx, "mine", types.MergePatchType,
		[]byte(`{"spec":{"matchingPrecedence":5},"status":{"conditions":[{"type":"Custom","status":"False","reason":"test"}]}}`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if st.Spec.MatchingPrecedence != 1000 || len(st.Status.Conditions) == 0 {
		t.Errorf("status patch: precedence %d conditions %v", st.Spec.MatchingPrecedence, st.Status.Conditions)
	}
	// An update of the main resource keeps the status.
	st.Status.Conditions = nil
	st.Spec.MatchingPrecedence = 2000
	up, err := fc.FlowSchemas().Update(ctx, st, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if up.Generation != 2 || len(up.Status.Conditions) == 0 {
		t.Errorf("update: generation %d conditions %v", up.Generation, up.Status.Conditions)
	}

	// Tables: upstream's columns.
	for path, want := range map[string][]string{
		"/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas":                 {"Name", "PriorityLevel", "MatchingPrecedence", "DistinguisherMethod", "Age", "MissingPL"},
		"/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations": {"Name", "Type", "NominalConcurrencyShares", "Queues", "HandSize", "QueueLengthLimit", "Age"},
	} {
		body, err := env.Client.Discovery().RESTClient().Get().AbsPath(path).SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var table metav1.Table
		if err := json.Unmarshal(body, &table); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range table.ColumnDefinitions {
			got = append(got, c.Name)
		}
		if len(got) != len(want) {
			t.Errorf("%s columns %v, want %v", path, got, want)
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s columns %v, want %v", path, got, want)
				break
			}
		}
		if len(table.Rows) == 0 {
			t.Errorf("%s: no rows", path)
		}
	}
}
