package apiserver_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/testenv"
)

// TestFlowControlFlood floods the API from one user whose FlowSchema leads to a level of
// few seats and one short queue: some of its requests are queued, some refused with 429
// and Retry-After, while another user's requests (global-default) are all served; the
// responses name the FlowSchema and priority level by UID.
func TestFlowControlFlood(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := ctxT(t)
	fc := env.Client.FlowcontrolV1()
	one := int32(1)
	pl, err := fc.PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "flood"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: &one, LimitResponse: flowcontrolv1.LimitResponse{
				Type: flowcontrolv1.LimitResponseTypeQueue, Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 1, HandSize: 1, QueueLengthLimit: 2}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := fc.FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "flood"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			MatchingPrecedence: 50, PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "flood"},
			DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "flooder"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
					Namespaces: []string{"*"}, ClusterScope: true}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Both users may list ConfigMaps (the default policy gives them nothing).
	if _, err := env.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cm-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "flooder"}, {Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	client := func(user string) *kubernetes.Clientset {
		cfg, err := env.ComponentConfig("apf-test", user)
		if err != nil {
			t.Fatal(err)
		}
		cfg = rest.CopyConfig(cfg)
		cfg.QPS, cfg.Burst = -1, 0
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	flooder, alice := client("flooder"), client("alice")
	// get lists ConfigMaps without client-go's retries of 429s.
	get := func(ctx context.Context, c *kubernetes.Clientset) int {
		err := c.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/configmaps").MaxRetries(0).Do(ctx).Error()
		switch {
		case err == nil:
			return http.StatusOK
		case apierrors.IsTooManyRequests(err):
			return http.StatusTooManyRequests
		}
		t.Errorf("list: %v", err)
		return 0
	}

	// The response headers show where the flooder's requests go, once the server's
	// caches have the new configuration.
	for {
		h := flowHeaders(t, env, "flooder")
		if h.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) == string(fs.UID) &&
			h.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID) == string(pl.UID) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("flooder's PF headers %v, want flow schema %s level %s", h, fs.UID, pl.UID)
		case <-time.After(20 * time.Millisecond):
		}
	}

	// RBAC's index follows the binding a moment after it is written.
	for _, c := range []*kubernetes.Clientset{flooder, alice} {
		for {
			_, err := c.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			if err == nil {
				break
			}
			if !apierrors.IsForbidden(err) || ctx.Err() != nil {
				t.Fatalf("list before the flood: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Flood until some requests are refused (the level has 3 seats and 2 queue places;
	// rounds of 100 concurrent requests make that all but certain at the first round).
	var rejected, aliceServed, aliceRefused atomic.Int64
	for round := 0; round < 20 && rejected.Load() == 0; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 100; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if get(ctx, flooder) == http.StatusTooManyRequests {
					rejected.Add(1)
				}
			}()
		}
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if get(ctx, alice) == http.StatusTooManyRequests {
					aliceRefused.Add(1)
				} else {
					aliceServed.Add(1)
				}
			}()
		}
		wg.Wait()
	}
	if rejected.Load() == 0 {
		t.Error("no flood request was refused")
	}
	if aliceRefused.Load() != 0 || aliceServed.Load() == 0 {
		t.Errorf("the other user: %d served, %d refused", aliceServed.Load(), aliceRefused.Load())
	}
	t.Logf("flood: %d refused; other user: %d served", rejected.Load(), aliceServed.Load())
}

// flowHeaders makes one request as user and returns the response headers.
func flowHeaders(t *testing.T, env *testenv.Env, user string) http.Header {
	t.Helper()
	cfg, err := env.ComponentConfig("apf-test", user)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("GET", cfg.Host+"/api/v1/namespaces/default/configmaps", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.Header
}
