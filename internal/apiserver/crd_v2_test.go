package apiserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// TestCustomResourceOpenAPIV2PreserveUnknown: a CRD whose schema keeps unknown
// fields at its root is published in /openapi/v2 as a bare object (upstream's v2
// builder: kubectl's v2 validation would refuse the unknown fields otherwise).
func TestCustomResourceOpenAPIV2PreserveUnknown(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	yes := true
	ac := apiextensionsclient.NewForConfigOrDie(env.Config)
	if _, err := ac.ApiextensionsV1().CustomResourceDefinitions().Create(ctx,
		widgetCRD(&apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &yes}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "a bare object in /openapi/v2", func() error {
		body, err := env.Client.Discovery().RESTClient().Get().AbsPath("/openapi/v2").DoRaw(ctx)
		if err != nil {
			return err
		}
		var sw spec.Swagger
		if err := json.Unmarshal(body, &sw); err != nil {
			t.Fatalf("decode /openapi/v2: %v", err)
		}
		def, ok := sw.Definitions["com.example.v1.Widget"]
		if !ok {
			return errors.New("no definition yet")
		}
		if len(def.Properties) != 0 || !def.Type.Contains("object") || def.Extensions["x-kubernetes-preserve-unknown-fields"] != nil ||
			def.Extensions["x-kubernetes-group-version-kind"] == nil {
			t.Fatalf("definition %+v", def)
		}
		return nil
	})
}

// TestActionNotAcceptableAsTable: an action's answer (an access review) has no
// Table form; asking only for one is 406, as upstream.
func TestActionNotAcceptableAsTable(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	sar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/", Verb: "get"}}}
	err := env.Client.AuthorizationV1().RESTClient().Post().Resource("selfsubjectaccessreviews").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Body(sar).Do(context.Background()).Error()
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Code != 406 {
		t.Fatalf("want 406, got %v", err)
	}
}
