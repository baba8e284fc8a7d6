package apiserver_test

import (
	"encoding/json"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// TestCustomResourceVersions: a CRD of two versions (v1 stored) serves both: an
// object applied (server-side) in v1beta1 is stored in v1 and read back in either
// version, with its list-map keys from the schema.
func TestCustomResourceVersions(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := ctxT(t)
	ac := apiextensionsclient.NewForConfigOrDie(env.Config)
	var c apiextensionsv1.CustomResourceValidation
	if err := json.Unmarshal([]byte(`{"openAPIV3Schema": {"type": "object","properties": {"spec": {"type": "object","properties": {"foo": {"type": "string"},
	"ports": {"type": "array","x-kubernetes-list-map-keys": ["containerPort","protocol"],"x-kubernetes-list-type": "map","items": {"properties": {"containerPort": {"format": "int32","type": "integer"},"name": {"type": "string"},"protocol": {"type": "string"}},"required": ["containerPort","protocol"],"type": "object"}}}}}}}`), &c); err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "noxus.mygroup.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "mygroup.example.com", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "noxus", Singular: "nonenglishnoxu", Kind: "WishIHadChosenNoxu", ListKind: "NoxuItemList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1beta1", Served: true, Schema: &c, Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}},
				{Name: "v1", Served: true, Storage: true, Schema: &c, Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}},
			}}}
	if _, err := ac.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "noxus served", func() error {
		_, err := ac.Discovery().ServerResourcesForGroupVersion("mygroup.example.com/v1beta1")
		return err
	})
	body := []byte(`
apiVersion: mygroup.example.com/v1beta1
kind: WishIHadChosenNoxu
metadata:
  name: mytest
spec:
  foo: foo1
  ports:
  - name: x
    containerPort: 80
    protocol: TCP`)
	rc := ac.Discovery().RESTClient()
	res, err := rc.Patch(types.ApplyPatchType).AbsPath("/apis/mygroup.example.com/v1beta1/noxus").Name("mytest").
		Param("fieldManager", "m").Param("fieldValidation", "Strict").Body(body).DoRaw(ctx)
	if err != nil {
		t.Fatalf("apply in v1beta1: %v %s", err, res)
	}
	var got map[string]any
	for _, v := range []string{"v1beta1", "v1"} {
		res, err := rc.Get().AbsPath("/apis/mygroup.example.com/" + v + "/noxus/mytest").DoRaw(ctx)
		if err != nil {
			t.Fatalf("get in %s: %v", v, err)
		}
		if err := json.Unmarshal(res, &got); err != nil {
			t.Fatal(err)
		}
		if got["apiVersion"] != "mygroup.example.com/"+v || got["spec"].(map[string]any)["foo"] != "foo1" {
			t.Errorf("in %s: %s", v, res)
		}
	}
	// A second apply of another port merges by the list-map keys.
	body2 := []byte("apiVersion: mygroup.example.com/v1\nkind: WishIHadChosenNoxu\nmetadata: {name: mytest}\nspec:\n  ports:\n  - {containerPort: 81, protocol: TCP}\n")
	res, err = rc.Patch(types.ApplyPatchType).AbsPath("/apis/mygroup.example.com/v1/noxus").Name("mytest").
		Param("fieldManager", "other").Body(body2).DoRaw(ctx)
	if err != nil {
		t.Fatalf("apply in v1: %v %s", err, res)
	}
	if err := json.Unmarshal(res, &got); err != nil {
		t.Fatal(err)
	}
	if ports := got["spec"].(map[string]any)["ports"].([]any); len(ports) != 2 {
		t.Errorf("ports after the second apply: %v", ports)
	}
}
