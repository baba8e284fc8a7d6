package apiserver_test

import (
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

func widgetCRD(schema *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: schema},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
}

func objectSchema(props map[string]apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	return &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
}

// causes returns the field: message pairs of a 422.
func causes(t *testing.T, err error) string {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("%v, want 422 Invalid", err)
	}
	var out []string
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		out = append(out, c.Field+": "+c.Message)
	}
	return strings.Join(out, "\n")
}

// TestCustomResourceDefinitions: the CRD kind through its own clientset, validated by
// upstream's package: a structural schema is accepted (defaults applied, the storage
// version recorded); a non-structural schema, a bad CEL rule and an invalid name are
// 422 with upstream's causes; the status is the server's on create and changes only
// through the status subresource.
func TestCustomResourceDefinitions(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := ctxT(t)
	c, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := c.ApiextensionsV1().CustomResourceDefinitions()
	good := widgetCRD(objectSchema(map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}},
			XValidations: apiextensionsv1.ValidationRules{{Rule: "self.size >= 0", Message: "size must not be negative"}}},
	}))
	good.Status.StoredVersions = []string{"v0"} // the server's to set
	got, err := crds.Create(ctx, good, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if len(got.Status.StoredVersions) != 1 || got.Status.StoredVersions[0] != "v1" {
		t.Errorf("storedVersions %v, want [v1]", got.Status.StoredVersions)
	}
	if got.Spec.Conversion == nil || got.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("conversion %+v, want the default None", got.Spec.Conversion)
	}
	if got.Generation != 1 {
		t.Errorf("generation %d", got.Generation)
	}

	// Not structural: a property without a type.
	bad := widgetCRD(objectSchema(map[string]apiextensionsv1.JSONSchemaProps{"spec": {}}))
	bad.Name, bad.Spec.Group = "widgets.bad.example.com", "bad.example.com"
	_, err = crds.Create(ctx, bad, metav1.CreateOptions{})
	if got := causes(t, err); !strings.Contains(got, "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields") {
		t.Errorf("non-structural causes:\n%s", got)
	}
	// A CEL rule that does not compile.
	bad = widgetCRD(objectSchema(map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}},
			XValidations: apiextensionsv1.ValidationRules{{Rule: "self.size >= 'a'"}}},
	}))
	bad.Name, bad.Spec.Group = "widgets.cel.example.com", "cel.example.com"
	_, err = crds.Create(ctx, bad, metav1.CreateOptions{})
	// Upstream's validation works on the internal version, where a schema all versions
	// share is spec.validation: its causes name that path, as upstream's do.
	if got := causes(t, err); !strings.Contains(got, "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value") ||
		!strings.Contains(got, "compilation failed") {
		t.Errorf("CEL causes:\n%s", got)
	}
	// The name must be plural.group.
	bad = widgetCRD(objectSchema(nil))
	bad.Name = "gadgets.example.com"
	_, err = crds.Create(ctx, bad, metav1.CreateOptions{})
	if got := causes(t, err); !strings.Contains(got, `metadata.name: Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group`) {
		t.Errorf("name causes:\n%s", got)
	}

	// An update of the main resource keeps the status; the spec's change bumps the
	// generation; the group may not change. (The naming controller writes the status
	// meanwhile: each update starts from a fresh read.)
	update := func(change func(*apiextensionsv1.CustomResourceDefinition), write func(*apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error)) (*apiextensionsv1.CustomResourceDefinition, error) {
		var out *apiextensionsv1.CustomResourceDefinition
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := crds.Get(ctx, "widgets.example.com", metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(cur)
			out, err = write(cur)
			return err
		})
		return out, err
	}
	replace := func(c *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
		return crds.Update(ctx, c, metav1.UpdateOptions{})
	}
	replaceStatus := func(c *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
		return crds.UpdateStatus(ctx, c, metav1.UpdateOptions{})
	}
	upd, err := update(func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Status.StoredVersions = []string{"v9"}
		c.Spec.Names.ShortNames = []string{"wd"}
	}, replace)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if upd.Generation != 2 || len(upd.Status.StoredVersions) != 1 || upd.Status.StoredVersions[0] != "v1" {
		t.Errorf("after update: generation %d storedVersions %v", upd.Generation, upd.Status.StoredVersions)
	}
	_, err = update(func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Group = "other.example.com" }, replace)
	if got := causes(t, err); !strings.Contains(got, "spec.group: Invalid value: \"other.example.com\": field is immutable") {
		t.Errorf("group change causes:\n%s", got)
	}
	// Patches and server-side apply carry no resourceVersion: they update the
	// current version (kubectl apply, client-side and --server-side).
	if _, err := crds.Patch(ctx, "widgets.example.com", types.MergePatchType, []byte(`{"spec":{"names":{"shortNames":["wd","w2"]}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	applied := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"},
		"spec":{"group":"example.com","scope":"Namespaced","names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList","shortNames":["wd"]},
		"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}},"subresources":{"status":{}}}]}}`
	ap, err := crds.Patch(ctx, "widgets.example.com", types.ApplyPatchType, []byte(applied), metav1.PatchOptions{FieldManager: "test", Force: ptrTo(true)})
	if err != nil {
		t.Fatalf("server-side apply: %v", err)
	}
	if len(ap.Spec.Names.ShortNames) != 1 {
		t.Errorf("after apply: short names %v", ap.Spec.Names.ShortNames)
	}
	// The status subresource writes the status only, validated as upstream's.
	_, err = update(func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Status.AcceptedNames = apiextensionsv1.CustomResourceDefinitionNames{Plural: "Widgets!", Kind: "Widget"}
	}, replaceStatus)
	if got := causes(t, err); !strings.Contains(got, "status.acceptedNames.plural: Invalid value: \"Widgets!\"") {
		t.Errorf("status update causes:\n%s", got)
	}
	st, err := update(func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Spec.Names.ShortNames = []string{"changed-through-status"}
	}, replaceStatus)
	if err != nil {
		t.Fatalf("status update: %v", err)
	}
	if len(st.Spec.Names.ShortNames) != 1 || st.Spec.Names.ShortNames[0] != "wd" {
		t.Errorf("after status update: spec names %+v", st.Spec.Names)
	}
	if len(st.ManagedFields) == 0 {
		t.Errorf("no managedFields")
	}
}

// TestCustomResourceDefinitionNaming: the API server's naming controller accepts a
// CRD's names and refuses, with upstream's condition, a second CRD of the group that
// asks for a kind already given (which is not Established); when the first goes, the
// second gets it and is served.
func TestCustomResourceDefinitionNaming(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := ctxT(t)
	c, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := c.ApiextensionsV1().CustomResourceDefinitions()
	condition := func(name string, typ apiextensionsv1.CustomResourceDefinitionConditionType, want string) *apiextensionsv1.CustomResourceDefinition {
		t.Helper()
		var got *apiextensionsv1.CustomResourceDefinition
		poll.Until(t, name+" "+string(typ)+" "+want, func() error {
			crd, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == typ {
					if s := string(cond.Status) + " " + cond.Reason + " " + cond.Message; s != want {
						return fmt.Errorf("%s", s)
					}
					got = crd
					return nil
				}
			}
			return fmt.Errorf("no %s condition in %+v", typ, crd.Status)
		})
		return got
	}
	first := widgetCRD(objectSchema(nil))
	if _, err := crds.Create(ctx, first, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := condition(first.Name, apiextensionsv1.NamesAccepted, "True NoConflicts no conflicts found")
	if got.Status.AcceptedNames.Plural != "widgets" || got.Status.AcceptedNames.Kind != "Widget" {
		t.Errorf("accepted names %+v", got.Status.AcceptedNames)
	}
	// Served once its names are accepted, then Established.
	condition(first.Name, apiextensionsv1.Established, "True InitialNamesAccepted the initial names have been accepted")

	second := widgetCRD(objectSchema(nil))
	second.Name, second.Spec.Names.Plural, second.Spec.Names.Singular = "gizmos.example.com", "gizmos", "gizmo"
	second.Spec.Names.ListKind = "GizmoList"
	if _, err := crds.Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	condition(second.Name, apiextensionsv1.NamesAccepted, `False KindConflict "Widget" is already in use`)
	condition(second.Name, apiextensionsv1.Established, "False NotAccepted not all names are accepted")

	if err := crds.Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The first's clean-up finalizer runs, then it is gone and its names are free.
	condition(second.Name, apiextensionsv1.NamesAccepted, "True NoConflicts no conflicts found")
	condition(second.Name, apiextensionsv1.Established, "True InitialNamesAccepted the initial names have been accepted")
}

func ptrTo[T any](v T) *T { return &v }
