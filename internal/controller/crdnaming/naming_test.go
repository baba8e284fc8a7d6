package crdnaming

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func crd(plural, singular, kind string, short ...string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "example.com",
		Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: singular, Kind: kind, ListKind: kind + "List", ShortNames: short},
	}}
}

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

func TestCalculate(t *testing.T) {
	for _, tc := range []struct {
		name              string
		crd               *apiextensionsv1.CustomResourceDefinition
		resources, kinds  map[string]bool
		reason, message   string
		plural, kind      string
		short             []string
		establishedReason string
	}{
		{name: "free", crd: crd("widgets", "widget", "Widget", "wd"), reason: "NoConflicts", message: "no conflicts found",
			plural: "widgets", kind: "Widget", short: []string{"wd"}, establishedReason: "Installing"},
		{name: "plural taken", crd: crd("widgets", "widget", "Widget"), resources: set("widgets"),
			reason: "PluralConflict", message: `"widgets" is already in use`, kind: "Widget", establishedReason: "NotAccepted"},
		{name: "kind taken", crd: crd("widgets", "widget", "Widget"), kinds: set("Widget"),
			reason: "KindConflict", message: `"Widget" is already in use`, plural: "widgets", establishedReason: "NotAccepted"},
		{name: "list kind taken", crd: crd("widgets", "widget", "Widget"), kinds: set("WidgetList"),
			reason: "ListKindConflict", message: `"WidgetList" is already in use`, plural: "widgets", kind: "Widget", establishedReason: "NotAccepted"},
		{name: "short names taken", crd: crd("widgets", "widget", "Widget", "a", "b", "c"), resources: set("a", "c"),
			reason: "ShortNamesConflict", message: `["a" is already in use, "c" is already in use]`, plural: "widgets", kind: "Widget", establishedReason: "NotAccepted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names, accepted, established := Calculate(tc.crd, tc.resources, tc.kinds)
			if accepted.Reason != tc.reason || accepted.Message != tc.message {
				t.Errorf("NamesAccepted %s %q, want %s %q", accepted.Reason, accepted.Message, tc.reason, tc.message)
			}
			wantStatus := apiextensionsv1.ConditionFalse
			if tc.reason == "NoConflicts" {
				wantStatus = apiextensionsv1.ConditionTrue
			}
			if accepted.Status != wantStatus {
				t.Errorf("NamesAccepted %s", accepted.Status)
			}
			if names.Plural != tc.plural || names.Kind != tc.kind || len(names.ShortNames) != len(tc.short) {
				t.Errorf("accepted names %+v", names)
			}
			if established.Status != apiextensionsv1.ConditionFalse || established.Reason != tc.establishedReason {
				t.Errorf("Established %s %s, want False %s", established.Status, established.Reason, tc.establishedReason)
			}
		})
	}
	// A name the CRD already has stays its own; a CRD already Established stays so.
	c := crd("widgets", "widget", "Widget")
	c.Status.AcceptedNames = c.Spec.Names
	c.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue, Reason: "InitialNamesAccepted"}}
	_, accepted, established := Calculate(c, set("widgets", "widget"), set("Widget", "WidgetList"))
	if accepted.Status != apiextensionsv1.ConditionTrue || established.Status != apiextensionsv1.ConditionTrue {
		t.Errorf("own names: %+v %+v", accepted, established)
	}
}
