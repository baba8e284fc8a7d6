package serviceaccount

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/filters"
)

var (
	testKeyOnce sync.Once
	testKeys    [2]*rsa.PrivateKey
)

// keys returns two RSA keys, generated once for the package's tests.
func keys(t testing.TB) (*rsa.PrivateKey, *rsa.PrivateKey) {
	t.Helper()
	testKeyOnce.Do(func() {
		for i := range testKeys {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			testKeys[i] = k
		}
	})
	return testKeys[0], testKeys[1]
}

// clock is a settable clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// objects is a Getter over a map.
type objects map[string]runtime.Object

func (o objects) Get(_ context.Context, gr schema.GroupResource, ns, name string) (runtime.Object, error) {
	if obj, ok := o[gr.Resource+"/"+ns+"/"+name]; ok {
		return obj, nil
	}
	return nil, apierrors.NewNotFound(gr, name)
}

const iss = "https://kubernetes.default.svc.cluster.local"

func fixtures() (objects, *corev1.ServiceAccount, *corev1.Pod, *corev1.Node) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "builder", UID: "sa-uid"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pod-uid"}, Spec: corev1.PodSpec{ServiceAccountName: "builder", NodeName: "n1"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}
	return objects{"serviceaccounts/ns/builder": sa, "pods/ns/p": pod, "nodes//n1": node}, sa, pod, node
}

func decodePart(t *testing.T, part string) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		t.Fatalf("decode %q: %v", part, err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return m
}

func TestBoundTokenLayout(t *testing.T) {
	key, _ := keys(t)
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	is, err := NewIssuer(iss, key, c.now)
	if err != nil {
		t.Fatal(err)
	}
	is.newID = func() string { return "id-1" }
	_, sa, pod, node := fixtures()
	tok, exp, err := is.BoundToken(sa, Binding{Pod: pod, Node: node}, []string{"api"}, 3600, 0)
	if err != nil {
		t.Fatal(err)
	}
	if exp != c.t.Add(time.Hour) {
		t.Errorf("expiry %v", exp)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q has %d parts", tok, len(parts))
	}
	kid, _ := KeyID(&key.PublicKey)
	if h := decodePart(t, parts[0]); !reflect.DeepEqual(h, map[string]any{"alg": "RS256", "kid": kid}) {
		t.Errorf("header %v", h)
	}
	got := decodePart(t, parts[1])
	want := map[string]any{
		"iss": iss, "sub": "system:serviceaccount:ns:builder", "aud": []any{"api"},
		"iat": 1.7e9, "nbf": 1.7e9, "exp": 1.7e9 + 3600, "jti": "id-1",
		"kubernetes.io": map[string]any{
			"namespace":      "ns",
			"serviceaccount": map[string]any{"name": "builder", "uid": "sa-uid"},
			"pod":            map[string]any{"name": "p", "uid": "pod-uid"},
			"node":           map[string]any{"name": "n1", "uid": "node-uid"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("claims\n got %v\nwant %v", got, want)
	}
	// As upstream's (go-jose merges the claims into a map): keys in sorted order.
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var order []string
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	_, _ = dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		order = append(order, k.(string))
		var skip json.RawMessage
		_ = dec.Decode(&skip)
	}
	if !sort.StringsAreSorted(order) {
		t.Errorf("claims not sorted: %v", order)
	}

	tok, _, err = is.BoundToken(sa, Binding{Pod: pod}, []string{"api"}, 3600, 3607)
	if err != nil {
		t.Fatal(err)
	}
	if w := decodePart(t, strings.Split(tok, ".")[1])["kubernetes.io"].(map[string]any)["warnafter"]; w != 1.7e9+3607 {
		t.Errorf("warnafter %v", w)
	}
	if _, _, err := is.BoundToken(sa, Binding{Pod: pod, Secret: &corev1.Secret{}}, nil, 3600, 0); err == nil {
		t.Error("a token bound to a pod and a secret was issued")
	}
}

func TestKeyID(t *testing.T) {
	key, other := keys(t)
	a, err := KeyID(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := KeyID(&other.PublicKey)
	if a == b || len(a) != 43 || strings.ContainsAny(a, "=+/") {
		t.Errorf("key IDs %q %q", a, b)
	}
}

func TestVerify(t *testing.T) {
	key, other := keys(t)
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	is, _ := NewIssuer(iss, key, c.now)
	foreign, _ := NewIssuer(iss, other, c.now)
	otherIssuer, _ := NewIssuer("https://elsewhere", key, c.now)
	v, err := NewVerifier([]string{iss, LegacyIssuer}, []*rsa.PublicKey{&key.PublicKey}, []string{iss}, c.now)
	if err != nil {
		t.Fatal(err)
	}
	_, sa, pod, _ := fixtures()
	good, _, _ := is.BoundToken(sa, Binding{Pod: pod}, []string{iss}, 3600, 0)
	if got, err := v.Verify(good, nil); err != nil || got.Claims.Kubernetes.Pod.UID != "pod-uid" || !reflect.DeepEqual(got.Audiences, []string{iss}) {
		t.Fatalf("Verify(good) = %+v, %v", got, err)
	}
	forAPI, _, _ := is.BoundToken(sa, Binding{}, []string{"vault"}, 3600, 0)
	if _, err := v.Verify(forAPI, nil); err == nil {
		t.Error("a token for another audience authenticated to the API")
	}
	if got, err := v.Verify(forAPI, []string{"vault", "x"}); err != nil || !reflect.DeepEqual(got.Audiences, []string{"vault"}) {
		t.Errorf("Verify(audience vault) = %+v, %v", got, err)
	}
	bad, _, _ := foreign.BoundToken(sa, Binding{}, []string{iss}, 3600, 0)
	if _, err := v.Verify(bad, nil); err == nil {
		t.Error("a token signed by another key verified")
	}
	if _, err := v.Verify(strings.Replace(good, ".", ".x", 1), nil); err == nil {
		t.Error("a tampered token verified")
	}
	mine, _, _ := otherIssuer.BoundToken(sa, Binding{}, []string{iss}, 3600, 0)
	if _, err := v.Verify(mine, nil); err != ErrNotOurs {
		t.Errorf("token of another issuer: %v, want ErrNotOurs", err)
	}
	for _, s := range []string{"", "abc", "a.b.c", `{"iss":"x"}`} {
		if _, err := v.Verify(s, nil); err != ErrNotOurs {
			t.Errorf("Verify(%q) = %v, want ErrNotOurs", s, err)
		}
	}

	c.t = c.t.Add(time.Hour + Leeway/2)
	if _, err := v.Verify(good, nil); err != nil {
		t.Errorf("token within the leeway: %v", err)
	}
	c.t = c.t.Add(Leeway)
	if _, err := v.Verify(good, nil); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired token: %v", err)
	}
	c.t = time.Unix(1_700_000_000, 0).Add(-2 * Leeway)
	if _, err := v.Verify(good, nil); err == nil {
		t.Error("a token from the future verified")
	}

	// The alg none attack and HMAC with the public key are refused.
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + strings.Split(good, ".")[1] + "."
	if _, err := v.Verify(none, nil); err == nil {
		t.Error("alg none verified")
	}
}

func TestAuthenticator(t *testing.T) {
	key, _ := keys(t)
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	is, _ := NewIssuer(iss, key, c.now)
	is.newID = func() string { return "id-1" }
	v, _ := NewVerifier([]string{iss, LegacyIssuer}, []*rsa.PublicKey{&key.PublicKey}, []string{iss}, c.now)
	objs, sa, pod, node := fixtures()
	a := NewAuthenticator(v, objs, c.now)
	tok, _, _ := is.BoundToken(sa, Binding{Pod: pod, Node: node}, []string{iss}, 3600, 0)

	req := httptest.NewRequest(http.MethodGet, "/api", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	u, ok, err := a.Authenticate(req)
	if err != nil || !ok {
		t.Fatalf("Authenticate: %v %v", ok, err)
	}
	want := &filters.User{Name: "system:serviceaccount:ns:builder", UID: "sa-uid",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"},
		Extra: map[string][]string{ExtraPodName: {"p"}, ExtraPodUID: {"pod-uid"}, ExtraNodeName: {"n1"}, ExtraNodeUID: {"node-uid"},
			ExtraCredentialID: {"JTI=id-1"}}}
	if !reflect.DeepEqual(u, want) {
		t.Errorf("user\n got %+v\nwant %+v", u, want)
	}

	other := httptest.NewRequest(http.MethodGet, "/api", nil)
	other.Header.Set("Authorization", "Bearer static-token")
	if _, ok, err := a.Authenticate(other); ok || err != nil {
		t.Errorf("a static token: %v %v, want not ours", ok, err)
	}

	// A recreated pod (another UID) and a deleted pod revoke the token.
	objs["pods/ns/p"] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "new"}}
	if _, ok, err := a.Authenticate(req); ok || err == nil {
		t.Error("a token of a recreated pod authenticated")
	}
	delete(objs, "pods/ns/p")
	if _, ok, err := a.Authenticate(req); ok || err == nil {
		t.Error("a token of a deleted pod authenticated")
	}
	objs["pods/ns/p"] = pod
	gone := metav1.NewTime(c.t.Add(-2 * Leeway))
	sa2 := sa.DeepCopy()
	sa2.DeletionTimestamp = &gone
	objs["serviceaccounts/ns/builder"] = sa2
	if _, ok, err := a.Authenticate(req); ok || err == nil {
		t.Error("a token of a deleted service account authenticated")
	}
	objs["serviceaccounts/ns/builder"] = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "builder", UID: "other"}}
	if _, ok, err := a.Authenticate(req); ok || err == nil {
		t.Error("a token of a recreated service account authenticated")
	}
}

func TestLegacyToken(t *testing.T) {
	key, _ := keys(t)
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	is, _ := NewIssuer(iss, key, c.now)
	v, _ := NewVerifier([]string{iss, LegacyIssuer}, []*rsa.PublicKey{&key.PublicKey}, []string{iss}, c.now)
	objs, sa, _, _ := fixtures()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "builder-token", UID: "s-uid"}, Type: corev1.SecretTypeServiceAccountToken}
	tok, err := is.LegacyToken(sa, secret)
	if err != nil {
		t.Fatal(err)
	}
	claims := decodePart(t, strings.Split(tok, ".")[1])
	if claims["iss"] != LegacyIssuer || claims["kubernetes.io/serviceaccount/secret.name"] != "builder-token" || claims["exp"] != nil {
		t.Errorf("legacy claims %v", claims)
	}
	secret.Data = map[string][]byte{corev1.ServiceAccountTokenKey: []byte(tok)}
	objs["secrets/ns/builder-token"] = secret
	a := NewAuthenticator(v, objs, c.now)
	u, _, err := a.AuthenticateToken(context.Background(), tok, nil)
	if err != nil || u.Name != "system:serviceaccount:ns:builder" || u.UID != "sa-uid" || u.Extra != nil {
		t.Fatalf("legacy token: %+v %v", u, err)
	}
	secret.Data[corev1.ServiceAccountTokenKey] = []byte("other")
	if _, _, err := a.AuthenticateToken(context.Background(), tok, nil); err == nil {
		t.Error("a legacy token its Secret no longer holds authenticated")
	}
	delete(objs, "secrets/ns/builder-token")
	if _, _, err := a.AuthenticateToken(context.Background(), tok, nil); err == nil {
		t.Error("a legacy token of a deleted Secret authenticated")
	}
}

func TestTokenRequest(t *testing.T) {
	key, _ := keys(t)
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	is, _ := NewIssuer(iss, key, c.now)
	v, _ := NewVerifier([]string{iss}, []*rsa.PublicKey{&key.PublicKey}, []string{iss}, c.now)
	objs, _, _, _ := fixtures()
	tr := &TokenRequests{Issuer: is, Objects: objs, APIAudiences: []string{iss}, ExtendExpiration: true, Now: c.now}
	ctx := context.Background()
	exp := func(n int64) *int64 { return &n }

	out, err := tr.Create(ctx, "ns", "builder", &authenticationv1.TokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*authenticationv1.TokenRequest)
	if *got.Spec.ExpirationSeconds != 3600 || !reflect.DeepEqual(got.Spec.Audiences, []string{iss}) || got.Name != "builder" || got.Namespace != "ns" ||
		!got.Status.ExpirationTimestamp.Time.Equal(c.t.Add(time.Hour)) {
		t.Errorf("defaults: %+v", got)
	}
	if _, err := v.Verify(got.Status.Token, nil); err != nil {
		t.Errorf("issued token: %v", err)
	}

	cases := []struct {
		name, sa string
		req      *authenticationv1.TokenRequest
		code     int32
	}{
		{"missing service account", "ghost", &authenticationv1.TokenRequest{}, 404},
		{"too short", "builder", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: exp(599)}}, 422},
		{"too long", "builder", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: exp(1<<32 + 1)}}, 422},
		{"name mismatch", "builder", &authenticationv1.TokenRequest{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, 422},
		{"missing pod", "builder", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "ghost"}}}, 404},
		{"pod uid", "builder", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p", UID: "old"}}}, 409},
		{"bad kind", "builder", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "ConfigMap", APIVersion: "v1", Name: "p"}}}, 400},
	}
	objs["serviceaccounts/ns/other"] = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", UID: "o"}}
	cases = append(cases, struct {
		name, sa string
		req      *authenticationv1.TokenRequest
		code     int32
	}{"pod of another service account", "other", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p"}}}, 400})
	for _, tc := range cases {
		_, err := tr.Create(ctx, "ns", tc.sa, tc.req)
		var st apierrors.APIStatus
		if err == nil || !asStatus(err, &st) || st.Status().Code != tc.code {
			t.Errorf("%s: %v, want %d", tc.name, err, tc.code)
		}
	}

	// The admission plugin's lifetime is extended to a year for the API audiences.
	out, err = tr.Create(ctx, "ns", "builder", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: exp(3607),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p", UID: "pod-uid"}}})
	if err != nil {
		t.Fatal(err)
	}
	got = out.(*authenticationv1.TokenRequest)
	claims := decodePart(t, strings.Split(got.Status.Token, ".")[1])
	if claims["exp"] != 1.7e9+ExtendedExpirationSeconds || !got.Status.ExpirationTimestamp.Time.Equal(c.t.Add(3607*time.Second)) {
		t.Errorf("extended token: exp %v, status %v", claims["exp"], got.Status.ExpirationTimestamp)
	}
}

func asStatus(err error, st *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	*st = s
	return ok
}

func TestTokenReview(t *testing.T) {
	key, _ := keys(t)
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	is, _ := NewIssuer(iss, key, c.now)
	v, _ := NewVerifier([]string{iss}, []*rsa.PublicKey{&key.PublicKey}, []string{iss}, c.now)
	objs, sa, _, _ := fixtures()
	r := &TokenReviews{ServiceAccounts: NewAuthenticator(v, objs, c.now), APIAudiences: []string{iss},
		Others: filters.NewTokenAuthenticator(map[string]*filters.User{"static": {Name: "alice", Groups: []string{"dev"}}})}
	ctx := context.Background()
	tok, _, _ := is.BoundToken(sa, Binding{}, []string{"vault"}, 3600, 0)

	review := func(token string, auds ...string) *authenticationv1.TokenReview {
		t.Helper()
		out, err := r.Create(ctx, "", "", &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: auds}})
		if err != nil {
			t.Fatal(err)
		}
		return out.(*authenticationv1.TokenReview)
	}
	if got := review(tok, "vault"); !got.Status.Authenticated || got.Status.User.Username != "system:serviceaccount:ns:builder" || !reflect.DeepEqual(got.Status.Audiences, []string{"vault"}) {
		t.Errorf("review: %+v", got.Status)
	}
	if got := review(tok); got.Status.Authenticated || got.Status.Error == "" {
		t.Errorf("review for the API audience: %+v", got.Status)
	}
	if got := review("static"); !got.Status.Authenticated || got.Status.User.Username != "alice" || !reflect.DeepEqual(got.Status.User.Groups, []string{"dev", "system:authenticated"}) {
		t.Errorf("static token review: %+v", got.Status)
	}
	if got := review("nonsense"); got.Status.Authenticated || got.Status.Error == "" {
		t.Errorf("nonsense review: %+v", got.Status)
	}
	if _, err := r.Create(ctx, "", "", &authenticationv1.TokenReview{}); !apierrors.IsBadRequest(err) {
		t.Errorf("empty token: %v", err)
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	var wg sync.WaitGroup
	got := make([]*rsa.PrivateKey, 4)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := LoadOrCreateKey(dir)
			if err != nil {
				t.Error(err)
			}
			got[i] = k
		}()
	}
	wg.Wait()
	for _, k := range got[1:] {
		if k == nil || !k.Equal(got[0]) {
			t.Fatal("servers sharing the directory got different keys")
		}
	}
	again, err := LoadOrCreateKey(dir)
	if err != nil || !again.Equal(got[0]) {
		t.Fatalf("reload: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, PublicKeyFile)); err != nil {
		t.Error(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, KeyFile)); fi.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v", fi.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("left behind: %v", entries)
	}
	bad := t.TempDir()
	_ = os.WriteFile(filepath.Join(bad, KeyFile), []byte("garbage"), 0o600)
	if _, err := LoadOrCreateKey(bad); err == nil {
		t.Error("a garbage key loaded")
	}
}

func TestDiscovery(t *testing.T) {
	key, _ := keys(t)
	d, err := NewDiscovery(iss, "https://10.0.0.1:6443/openid/v1/jwks", []*rsa.PublicKey{&key.PublicKey})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	d.ConfigHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, OpenIDConfigPath, nil))
	if rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Cache-Control") != "public, max-age=3600" {
		t.Errorf("headers %v", rec.Header())
	}
	want := `{"issuer":"https://kubernetes.default.svc.cluster.local","jwks_uri":"https://10.0.0.1:6443/openid/v1/jwks","response_types_supported":["id_token"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["RS256"]}`
	if rec.Body.String() != want {
		t.Errorf("config %s", rec.Body)
	}
	rec = httptest.NewRecorder()
	d.KeysHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, JWKSPath, nil))
	var set JWKS
	if err := json.Unmarshal(rec.Body.Bytes(), &set); err != nil || len(set.Keys) != 1 || rec.Header().Get("Content-Type") != "application/jwk-set+json" {
		t.Fatalf("jwks %s %v", rec.Body, err)
	}
	kid, _ := KeyID(&key.PublicKey)
	if k := set.Keys[0]; k.Kid != kid || k.Kty != "RSA" || k.Alg != "RS256" || k.Use != "sig" || k.E != "AQAB" {
		t.Errorf("jwk %+v", k)
	}
	n, _ := base64.RawURLEncoding.DecodeString(set.Keys[0].N)
	if string(n) != string(key.PublicKey.N.Bytes()) {
		t.Error("modulus differs")
	}
	rec = httptest.NewRecorder()
	d.KeysHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, JWKSPath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", rec.Code)
	}
	for _, bad := range []string{"http://x", "https://x?a=b", "https://x#f"} {
		if _, err := NewDiscovery(bad, "https://x/jwks", []*rsa.PublicKey{&key.PublicKey}); err == nil {
			t.Errorf("issuer %q accepted", bad)
		}
	}
}

func TestSplitUsername(t *testing.T) {
	for in, want := range map[string][2]string{
		"system:serviceaccount:ns:sa": {"ns", "sa"}, "system:serviceaccount:ns": {}, "alice": {}, "system:serviceaccount:NS:sa": {},
		"system:serviceaccount:ns:sa:x": {},
	} {
		ns, name, ok := SplitUsername(in)
		if ok != (want[0] != "") || ns != want[0] || name != want[1] {
			t.Errorf("SplitUsername(%q) = %q %q %v", in, ns, name, ok)
		}
	}
}

// TestVerifySignedCache: a token whose signature checked out is not verified again, but
// a token that differs from it anywhere (its signature included) is, and failures are
// not remembered.
func TestVerifySignedCache(t *testing.T) {
	key, other := keys(t)
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	is, _ := NewIssuer(iss, key, c.now)
	foreign, _ := NewIssuer(iss, other, c.now)
	v, err := NewVerifier([]string{iss}, []*rsa.PublicKey{&key.PublicKey}, []string{iss}, c.now)
	if err != nil {
		t.Fatal(err)
	}
	_, sa, pod, _ := fixtures()
	good, _, _ := is.BoundToken(sa, Binding{Pod: pod}, []string{iss}, 3600, 0)
	if _, ok := v.signed.get(good); ok || !v.Recognizes(good) {
		t.Fatal("a token is known before its first verification, or not recognized")
	}
	first, err := v.Verify(good, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cached, ok := v.signed.get(good); !ok || cached != first.Claims || !v.Recognizes(good) {
		t.Fatalf("after a verification: cached %v, recognized %v", ok, v.Recognizes(good))
	}
	again, err := v.Verify(good, nil)
	if err != nil || !reflect.DeepEqual(again, first) {
		t.Fatalf("second Verify = %+v, %v; want %+v", again, err, first)
	}

	// The payload of the cached token with another key's signature, or a signature cut
	// short, does not verify.
	parts := strings.Split(good, ".")
	bad, _, _ := foreign.BoundToken(sa, Binding{Pod: pod}, []string{iss}, 3600, 0)
	forged := parts[0] + "." + parts[1] + "." + strings.Split(bad, ".")[2]
	for _, tok := range []string{forged, parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-4]} {
		for i := 0; i < 2; i++ {
			if _, err := v.Verify(tok, nil); err == nil {
				t.Fatalf("attempt %d: a token with the cached payload and another signature verified", i)
			}
		}
		if _, ok := v.signed.get(tok); ok {
			t.Error("a failed verification was remembered")
		}
	}

	// The cached outcome does not cover the times or the audiences.
	if _, err := v.Verify(good, []string{"vault"}); err == nil {
		t.Error("a cached token verified for an audience it does not carry")
	}
	c.t = c.t.Add(time.Hour + 2*Leeway)
	if _, err := v.Verify(good, nil); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("cached expired token: %v", err)
	}
}

func TestSignedCacheBound(t *testing.T) {
	c := newSignedCache()
	for i := 0; i < signedCacheSize+100; i++ {
		c.put("token-"+strconv.Itoa(i), &Claims{})
	}
	if n := len(c.claims); n != signedCacheSize {
		t.Errorf("%d entries, want the bound %d", n, signedCacheSize)
	}
	last := "token-" + strconv.Itoa(signedCacheSize+99)
	if _, ok := c.get(last); !ok {
		t.Error("the entry just put is missing")
	}
}

// BenchmarkAuthenticate measures the authentication of one bound token used again and
// again, as a client's requests do.
func BenchmarkAuthenticate(b *testing.B) {
	key, _ := keys(b)
	is, _ := NewIssuer(iss, key, nil)
	v, _ := NewVerifier([]string{iss}, []*rsa.PublicKey{&key.PublicKey}, []string{iss}, nil)
	objs, sa, pod, _ := fixtures()
	a := NewAuthenticator(v, objs, nil)
	tok, _, _ := is.BoundToken(sa, Binding{Pod: pod}, []string{iss}, 3600, 0)
	req := httptest.NewRequest(http.MethodGet, "/api", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := a.Authenticate(req); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
