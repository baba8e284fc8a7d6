package credentials_test

import (
	"context"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/controller/credentials"
	"github.com/kubette/kubette/internal/testenv"
)

// TestServiceAccounts: a controller gets its ServiceAccount (created on demand) and calls
// the API as it, with the rights of its system:controller:<name> role and none of the
// manager's (here the admin's, over TLS as a kubeconfig gives them).
func TestServiceAccounts(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	base := env.Config
	ctx := context.Background()
	configFor, err := credentials.ServiceAccounts(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configFor("deployment-controller")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLSClientConfig.CertData != nil || cfg.BearerToken != "" {
		t.Fatalf("the controller's configuration kept the manager's credentials")
	}
	c := kubernetes.NewForConfigOrDie(cfg)
	who, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := who.Status.UserInfo.Username; got != "system:serviceaccount:kube-system:deployment-controller" {
		t.Fatalf("user %q", got)
	}
	if _, err := env.Client.CoreV1().ServiceAccounts("kube-system").Get(ctx, "deployment-controller", metav1.GetOptions{}); err != nil {
		t.Fatalf("the ServiceAccount was not created: %v", err)
	}
	if _, err := c.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("the deployment controller may list ReplicaSets: %v", err)
	}
	if _, err := c.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list secrets as the deployment controller: %v, want 403", err)
	}
	// A second controller's ServiceAccount already existing is fine.
	if _, err := configFor("deployment-controller"); err != nil {
		t.Fatal(err)
	}
}
