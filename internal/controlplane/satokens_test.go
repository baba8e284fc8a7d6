package controlplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/serviceaccount"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// bearerClient is a client of env's API server with token and no client certificate.
func bearerClient(t *testing.T, env *testenv.Env, token string) (kubernetes.Interface, *http.Client) {
	t.Helper()
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = token
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg), hc
}

// TestServiceAccountTokens requests a token bound to a pod, authenticates with it (whoami,
// the OIDC discovery documents, TokenReview), and sees it refused once the pod is deleted.
func TestServiceAccountTokens(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	admin := env.Client
	sa, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{ServiceAccountName: "builder", AutomountServiceAccountToken: new(bool), Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var tr *authenticationv1.TokenRequest
	poll.Until(t, "a token bound to the pod", func() error {
		tr, err = admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "builder", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p", UID: pod.UID}}}, metav1.CreateOptions{})
		return err
	})
	if *tr.Spec.ExpirationSeconds != 3600 || len(tr.Spec.Audiences) != 1 || tr.Spec.Audiences[0] != serviceaccount.DefaultIssuer {
		t.Errorf("token request defaults: %+v", tr.Spec)
	}

	client, hc := bearerClient(t, env, tr.Status.Token)
	ssr, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("whoami with the token: %v", err)
	}
	u := ssr.Status.UserInfo
	if u.Username != "system:serviceaccount:default:builder" || u.UID != string(sa.UID) ||
		strings.Join(u.Groups, ",") != "system:serviceaccounts,system:serviceaccounts:default,system:authenticated" ||
		len(u.Extra[serviceaccount.ExtraPodName]) != 1 || u.Extra[serviceaccount.ExtraPodName][0] != "p" ||
		len(u.Extra[serviceaccount.ExtraCredentialID]) != 1 || !strings.HasPrefix(u.Extra[serviceaccount.ExtraCredentialID][0], "JTI=") {
		t.Errorf("whoami: %+v", u)
	}

	// The OIDC discovery documents, read with the token.
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	getJSON(t, hc, env.Config.Host+serviceaccount.OpenIDConfigPath, &doc)
	if doc.Issuer != serviceaccount.DefaultIssuer || !strings.HasSuffix(doc.JWKSURI, serviceaccount.JWKSPath) {
		t.Errorf("discovery document %+v", doc)
	}
	var jwks serviceaccount.JWKS
	getJSON(t, hc, env.Config.Host+serviceaccount.JWKSPath, &jwks)
	if len(jwks.Keys) != 1 || jwks.Keys[0].Alg != "RS256" {
		t.Errorf("jwks %+v", jwks)
	}

	review, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !review.Status.Authenticated || review.Status.User.Username != "system:serviceaccount:default:builder" || len(review.Status.Audiences) != 1 {
		t.Errorf("token review %+v", review.Status)
	}

	// Bad requests, as upstream.
	short := int64(599)
	_, err = admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "builder", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &short}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "may not specify a duration less than 10 minutes") {
		t.Errorf("a 599 s token: %v", err)
	}
	if _, err = admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "ghost", &authenticationv1.TokenRequest{}, metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a token of a missing service account: %v", err)
	}
	for _, bad := range []string{"garbage", tr.Status.Token[:len(tr.Status.Token)-4] + "AAAA", "a.b.c"} {
		_, hc := bearerClient(t, env, bad)
		resp, err := hc.Get(env.Config.Host + "/api/v1/namespaces")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), "signature") || strings.Contains(string(body), "token") {
			t.Errorf("token %.10q: %d %s", bad, resp.StatusCode, body)
		}
	}

	// Deleting the pod revokes the token.
	zero := int64(0)
	if err := admin.CoreV1().Pods("default").Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the token refused", func() error {
		_, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if apierrors.IsUnauthorized(err) {
			return nil
		}
		return fmt.Errorf("whoami: %v", err)
	})
}

func getJSON(t *testing.T, hc *http.Client, url string, into any) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, into); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, body)
	}
}

// TestServiceAccountAdmission creates pods through the API with the ServiceAccount plugin on:
// a pod in a namespace without its ServiceAccount is refused as upstream refuses it, one
// with it gets the token volume.
func TestServiceAccountAdmission(t *testing.T) {
	env := testenv.Start(t, testenv.Options{ServiceAccountAdmission: true})
	ctx := context.Background()
	pods := env.Client.CoreV1().Pods("default")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	_, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if want := `pods "p" is forbidden: error looking up service account default/default: serviceaccount "default" not found`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("pod without its service account: %v, want %q", err, want)
	}
	if _, err := env.Client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	poll.Until(t, "the pod admitted", func() error {
		got, err = pods.Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	if got.Spec.ServiceAccountName != "default" || len(got.Spec.Volumes) != 1 || !strings.HasPrefix(got.Spec.Volumes[0].Name, "kube-api-access-") ||
		len(got.Spec.Containers[0].VolumeMounts) != 1 || got.Spec.Containers[0].VolumeMounts[0].MountPath != "/var/run/secrets/kubernetes.io/serviceaccount" {
		t.Errorf("admitted pod: %+v", got.Spec)
	}
}
