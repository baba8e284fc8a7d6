package flowcontrol

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
	"github.com/kubette/kubette/internal/apiserver/flowcontrol/bootstrap"
)

// fakeSource serves fixed objects; bump moves its revision.
type fakeSource struct {
	mu  sync.Mutex
	fss []*flowcontrolv1.FlowSchema
	pls []*flowcontrolv1.PriorityLevelConfiguration
	rev int64
}

func (f *fakeSource) List(_ context.Context, gr schema.GroupResource, _ string) ([]runtime.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []runtime.Object
	if gr == FlowSchemas {
		for _, o := range f.fss {
			out = append(out, o)
		}
	} else {
		for _, o := range f.pls {
			out = append(out, o)
		}
	}
	return out, nil
}

func (f *fakeSource) Revision(schema.GroupResource) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev
}

// bootstrapSource is upstream's bootstrap configuration, with UIDs.
func bootstrapSource() *fakeSource {
	f := &fakeSource{rev: 1}
	for _, fs := range append(bootstrap.MandatoryFlowSchemas(), bootstrap.SuggestedFlowSchemas()...) {
		fs.UID = types.UID("fs-" + fs.Name)
		f.fss = append(f.fss, fs)
	}
	for _, pl := range append(bootstrap.MandatoryPriorityLevelConfigurations(), bootstrap.SuggestedPriorityLevelConfigurations()...) {
		pl.UID = types.UID("pl-" + pl.Name)
		f.pls = append(f.pls, pl)
	}
	return f
}

func request(method, path string, u *filters.User) *http.Request {
	req := httptest.NewRequest(method, path, nil)
	if u != nil {
		req = req.WithContext(filters.WithUser(req.Context(), u))
	}
	return req
}

func TestClassify(t *testing.T) {
	c := New(Config{Source: bootstrapSource()})
	auth := func(name string, groups ...string) *filters.User {
		return &filters.User{Name: name, Groups: append(groups, "system:authenticated")}
	}
	node := auth("system:node:n1", "system:nodes")
	cases := []struct {
		name, method, path string
		user               *filters.User
		schema, level      string
		distinguisher      string
	}{
		{"admin", "GET", "/api/v1/pods", auth("admin", "system:masters"), "exempt", "exempt", ""},
		{"probe", "GET", "/readyz", &filters.User{Name: filters.Anonymous, Groups: []string{"system:unauthenticated"}}, "probes", "exempt", ""},
		{"probe subpath", "GET", "/livez/ping", auth("bob"), "probes", "exempt", ""},
		{"controller-manager lease", "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager",
			auth("system:kube-controller-manager"), "system-leader-election", "leader-election", "system:kube-controller-manager"},
		{"controller-manager pods", "GET", "/api/v1/namespaces/team/pods", auth("system:kube-controller-manager"), "kube-controller-manager", "workload-high", "team"},
		{"endpoints controller", "PUT", "/api/v1/namespaces/team/endpoints/web",
			auth("system:serviceaccount:kube-system:endpoint-controller", "system:serviceaccounts"), "endpoint-controller", "workload-high", "system:serviceaccount:kube-system:endpoint-controller"},
		{"kube-system SA", "GET", "/api/v1/namespaces/team/pods",
			auth("system:serviceaccount:kube-system:foo", "system:serviceaccounts"), "kube-system-service-accounts", "workload-high", "team"},
		{"other SA", "GET", "/api/v1/namespaces/team/pods",
			auth("system:serviceaccount:team:foo", "system:serviceaccounts"), "service-accounts", "workload-low", "system:serviceaccount:team:foo"},
		{"node status", "PATCH", "/api/v1/nodes/n1/status", node, "system-node-high", "node-high", "system:node:n1"},
		{"node lease", "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", node, "system-node-high", "node-high", "system:node:n1"},
		{"node pods", "GET", "/api/v1/pods", node, "system-nodes", "system", "system:node:n1"},
		{"user", "GET", "/api/v1/namespaces/team/configmaps", auth("bob"), "global-default", "global-default", "bob"},
		{"anonymous", "GET", "/version", &filters.User{Name: filters.Anonymous, Groups: []string{"system:unauthenticated"}}, "global-default", "global-default", filters.Anonymous},
	}
	for _, tc := range cases {
		req := request(tc.method, tc.path, tc.user)
		u, _ := filters.UserFrom(req.Context())
		a := authorizer.RequestAttributes(req, u)
		got := c.Classify(context.Background(), &a)
		if got.FlowSchema.Name != tc.schema || got.PriorityLevel.Name != tc.level || got.Distinguisher != tc.distinguisher {
			t.Errorf("%s: %s/%s/%q, want %s/%s/%q", tc.name, got.FlowSchema.Name, got.PriorityLevel.Name, got.Distinguisher,
				tc.schema, tc.level, tc.distinguisher)
		}
	}
}

func TestClassifyConfigChangesAndDangling(t *testing.T) {
	src := bootstrapSource()
	c := New(Config{Source: src})
	bob := &filters.User{Name: "bob", Groups: []string{"system:authenticated"}}
	mine := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "bob"}, Spec: flowcontrolv1.FlowSchemaSpec{
		MatchingPrecedence: 50, PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "missing"},
		Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
			Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "bob"}}},
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"pods/log", "configmaps"}, Namespaces: []string{"team"}}},
		}},
	}}
	src.mu.Lock()
	src.fss = append(src.fss, mine)
	src.rev++
	src.mu.Unlock()
	classify := func(path string) string {
		req := request("GET", path, bob)
		a := authorizer.RequestAttributes(req, bob)
		return c.Classify(context.Background(), &a).FlowSchema.Name
	}
	if got := classify("/api/v1/namespaces/team/configmaps"); got != "global-default" {
		t.Errorf("a schema naming a missing level matched: %s", got)
	}
	src.mu.Lock()
	src.pls = append(src.pls, &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "missing"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}}})
	src.rev++
	src.mu.Unlock()
	if got := classify("/api/v1/namespaces/team/configmaps"); got != "bob" {
		t.Errorf("after the level appeared: %s, want bob", got)
	}
	if got := classify("/api/v1/namespaces/other/configmaps"); got != "global-default" {
		t.Errorf("other namespace: %s", got)
	}
	if got := classify("/api/v1/namespaces/team/pods"); got != "global-default" {
		t.Errorf("other resource: %s", got)
	}
	if got := classify("/api/v1/namespaces/team/pods/p/log"); got != "bob" {
		t.Errorf("subresource rule: %s", got)
	}
	// Shares are split in proportion: the new level's 30 (default) of the total.
	stats := c.Stats(context.Background())
	if stats["missing"].Seats == 0 || stats["exempt"].Seats != 0 || stats["global-default"].Seats != (600*20+274)/275 {
		t.Errorf("seats: %+v", stats)
	}
}

func TestEmptyConfigUsesMandatory(t *testing.T) {
	c := New(Config{Source: &fakeSource{}})
	u := &filters.User{Name: "bob", Groups: []string{"system:authenticated"}}
	a := authorizer.RequestAttributes(request("GET", "/api/v1/pods", u), u)
	if got := c.Classify(context.Background(), &a); got.FlowSchema.Name != bootstrap.CatchAll || got.PriorityLevel.Name != bootstrap.CatchAll {
		t.Errorf("empty configuration: %s/%s, want catch-all", got.FlowSchema.Name, got.PriorityLevel.Name)
	}
}

func TestDealIsDistinctAndStable(t *testing.T) {
	for deck := 1; deck <= 12; deck++ {
		for hand := 1; hand <= deck; hand++ {
			for h := uint64(0); h < 2000; h += 7 {
				seen := map[int]bool{}
				deal(h*0x9E3779B97F4A7C15, deck, hand, func(q int) {
					if q < 0 || q >= deck || seen[q] {
						t.Fatalf("deck %d hand %d hash %d: card %d repeated or out of range", deck, hand, h, q)
					}
					seen[q] = true
				})
				if len(seen) != hand {
					t.Fatalf("deck %d hand %d: %d cards", deck, hand, len(seen))
				}
			}
		}
	}
}

func TestLevelFairQueuing(t *testing.T) {
	// A hand of one queue, so that the flood fills its queue after 50 requests.
	l := newLevel(shape{queues: 64, handSize: 1, queueLengthLimit: 50}, 2)
	// The clock stands still: the flood's queue has been charged the estimated work
	// of its two requests, the other flow's nothing, so fair queuing serves the
	// other first (as the clock runs, a flow is charged its requests' service time
	// only when they finish: see TestLevelFairShares for the long run).
	l.now = func() time.Duration { return 0 }
	ctx := context.Background()
	// Two requests of the flood take both seats.
	flood := flowHash("fs", "flood")
	queueOf := func(h uint64) (q int) {
		deal(h, 64, 1, func(c int) { q = c })
		return q
	}
	other := flowHash("fs", "other")
	for i := 0; queueOf(other) == queueOf(flood); i++ {
		other = flowHash("fs", "other"+strconv.Itoa(i))
	}
	var releases []func()
	for i := 0; i < 2; i++ {
		r, err := acquire(ctx, l, flood, oneSeat)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, func() { l.finish(r) })
	}
	// The flood queues 50 more (its queue is full then: the 51st waiter would be
	// refused), and one request of another flow waits behind them.
	type result struct {
		who string
		t   ticket
		err error
	}
	results := make(chan result, 100)
	start := func(who string, h uint64) {
		go func() {
			r, err := acquire(ctx, l, h, oneSeat)
			results <- result{who, r, err}
		}()
	}
	waitQueued := func(n int) {
		for {
			_, _, w := l.stats()
			if w >= n {
				return
			}
			select {
			case r := <-results:
				t.Fatalf("%s finished early: %v", r.who, r.err)
			default:
			}
		}
	}
	for i := 0; i < 50; i++ {
		start("flood", flood)
		waitQueued(i + 1)
	}
	start("flood", flood)
	if r := <-results; r.err != errRejected {
		t.Fatalf("a flood request beyond its queues' length: %v, want rejected", r.err)
	}
	start("other", other)
	waitQueued(51)
	// Free one seat: the other flow's request goes before the flood's 50 queued ones.
	releases[0]()
	r := <-results
	if r.who != "other" || r.err != nil {
		t.Fatalf("first served after a release: %s (%v), want other", r.who, r.err)
	}
	l.finish(r.t)
	releases[1]()
	for i := 0; i < 50; i++ {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		l.finish(r.t)
	}
	if seats, ex, w := l.stats(); ex != 0 || w != 0 || seats != 2 {
		t.Errorf("after all: seats %d executing %d waiting %d", seats, ex, w)
	}
}

func TestLevelTimeoutAndReject(t *testing.T) {
	l := newLevel(shape{queues: 4, handSize: 2, queueLengthLimit: 1}, 1)
	held, err := acquire(context.Background(), l, 1, oneSeat)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := acquire(ctx, l, 1, oneSeat); err != errTimedOut {
		t.Errorf("wait past the deadline: %v, want timed out", err)
	}
	if _, _, w := l.stats(); w != 0 {
		t.Errorf("a timed-out request stays queued: %d", w)
	}
	l.finish(held)
	rej := newLevel(shape{reject: true}, 1)
	r, err := acquire(context.Background(), rej, 1, oneSeat)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acquire(context.Background(), rej, 2, oneSeat); err != errRejected {
		t.Errorf("a Reject level without a seat: %v", err)
	}
	rej.finish(r)
	ex := newLevel(shape{exempt: true}, 0)
	for i := 0; i < 10; i++ {
		if _, err := acquire(context.Background(), ex, 1, estimate{seats: 10}); err != nil {
			t.Fatalf("exempt waited: %v", err)
		}
	}
}

func TestHandlerHeadersAnd429(t *testing.T) {
	src := bootstrapSource()
	// A level of one seat that rejects, for bob.
	src.pls = append(src.pls, &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "tiny", UID: "pl-tiny"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr(0), LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}}})
	src.fss = append(src.fss, &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "bob", UID: "fs-bob"}, Spec: flowcontrolv1.FlowSchemaSpec{
		MatchingPrecedence: 50, PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "tiny"},
		Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
			Subjects:         []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "bob"}}},
			NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
		}},
	}})
	c := New(Config{Source: src})
	served := 0
	h := c.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served++ }))
	alice := &filters.User{Name: "alice", Groups: []string{"system:authenticated"}}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, request("GET", "/version", alice))
	if rec.Code != 200 || rec.Header().Get("X-Kubernetes-PF-FlowSchema-UID") != "fs-global-default" ||
		rec.Header().Get("X-Kubernetes-PF-PriorityLevel-UID") != "pl-global-default" {
		t.Errorf("alice: %d %v", rec.Code, rec.Header())
	}
	bob := &filters.User{Name: "bob", Groups: []string{"system:authenticated"}}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, request("GET", "/version", bob))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" ||
		rec.Body.String() != "Too many requests, please try again later.\n" {
		t.Errorf("bob on a level of no seats: %d %q %v", rec.Code, rec.Body.String(), rec.Header())
	}
	// Long-running requests are not counted, even on a level without seats.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, request("POST", "/api/v1/namespaces/a/pods/p/exec", bob))
	if rec.Code != 200 || served != 2 {
		t.Errorf("exec: %d, served %d", rec.Code, served)
	}
}

func ptr(v int32) *int32 { return &v }

// acquire takes a request's seats from l, waiting as long as ctx lets it.
func acquire(ctx context.Context, l *level, hash uint64, est estimate) (ticket, error) {
	t, w, err := l.start(hash, est)
	if w == nil || err != nil {
		return t, err
	}
	return l.await(ctx, w, time.Hour)
}
