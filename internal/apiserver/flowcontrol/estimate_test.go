package flowcontrol

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

// fakeCounts is an ObjectCounter over fixed counts.
type fakeCounts map[schema.GroupResource]int64

func (f fakeCounts) ObjectCount(gr schema.GroupResource) (int64, bool) {
	n, ok := f[gr]
	return n, ok
}

var configMaps = schema.GroupResource{Resource: "configmaps"}

func estimateOf(c *Controller, method, path string, levelMax int) estimate {
	u := &filters.User{Name: "bob", Groups: []string{"system:authenticated"}}
	req := request(method, path, u)
	a := authorizer.RequestAttributes(req, u)
	return c.estimateWork(req, &a, levelMax)
}

func TestListSeatsByObjectCount(t *testing.T) {
	counts := fakeCounts{}
	c := New(Config{Source: bootstrapSource(), Objects: counts})
	// Served from the watch cache: ceil(stored / 100), from 1 to 10.
	for _, tc := range []struct {
		stored int64
		seats  int
	}{{0, 1}, {50, 1}, {101, 2}, {5000, 10}} {
		counts[configMaps] = tc.stored
		if got := estimateOf(c, "GET", "/api/v1/namespaces/team/configmaps?resourceVersion=0", 0); got != (estimate{seats: tc.seats}) {
			t.Errorf("%d stored, from the cache: %+v, want %d seats", tc.stored, got, tc.seats)
		}
	}
	counts[configMaps] = 300
	for _, tc := range []struct {
		name, path string
		levelMax   int
		seats      int
	}{
		// From storage without a selector: twice the page.
		{"storage", "/api/v1/namespaces/team/configmaps", 0, 6},
		{"storage, limit", "/api/v1/namespaces/team/configmaps?limit=50", 0, 1},
		{"storage, limit above the count", "/api/v1/namespaces/team/configmaps?limit=1000", 0, 6},
		{"continue from the cache's revision", "/api/v1/namespaces/team/configmaps?resourceVersion=0&continue=x", 0, 6},
		// With a selector: the count plus the page.
		{"label selector, limit", "/api/v1/namespaces/team/configmaps?labelSelector=a%3Db&limit=100", 0, 4},
		{"field selector", "/api/v1/configmaps?fieldSelector=metadata.namespace%3Dteam", 0, 6},
		// One name: one object.
		{"by name", "/api/v1/namespaces/team/configmaps?fieldSelector=metadata.name%3Dx", 0, 1},
		// The level's bound.
		{"level bound", "/api/v1/namespaces/team/configmaps", 4, 4},
		// A watch asking for its initial events is a list from the cache.
		{"watch with initial events", "/api/v1/namespaces/team/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", 0, 3},
		{"watch", "/api/v1/namespaces/team/configmaps?watch=true", 0, 1},
		// Not a list.
		{"get", "/api/v1/namespaces/team/configmaps/x", 0, 1},
		// No count: one seat.
		{"unknown count", "/api/v1/namespaces/team/secrets", 0, 1},
		{"non-resource", "/version", 0, 1},
	} {
		if got := estimateOf(c, "GET", tc.path, tc.levelMax); got != (estimate{seats: tc.seats}) {
			t.Errorf("%s: %+v, want %d seats", tc.name, got, tc.seats)
		}
	}
	// Without an ObjectCounter every list is one seat.
	if got := estimateOf(New(Config{Source: bootstrapSource()}), "GET", "/api/v1/configmaps", 0); got != oneSeat {
		t.Errorf("no counter: %+v", got)
	}
}

func TestLevelMaxSeats(t *testing.T) {
	queuing := shape{queues: 128, handSize: 6, queueLengthLimit: 50}
	for _, tc := range []struct {
		sh          shape
		seats, want int
	}{
		{queuing, 49, 8}, // global-default at 600 seats: 8 (15% = 7.35, 49/6 = 8)
		{queuing, 44, 7},
		{queuing, 219, 33}, // workload-low (the estimators' bound of 10 applies after)
		{queuing, 5, 1},
		{shape{queues: 16, handSize: 4, queueLengthLimit: 50}, 22, 4},
		{shape{reject: true}, 100, 0},
		{shape{exempt: true}, 0, 0},
	} {
		if got := levelMaxSeats(tc.sh, tc.seats); got != tc.want {
			t.Errorf("%+v with %d seats: %d, want %d", tc.sh, tc.seats, got, tc.want)
		}
	}
	c := New(Config{Source: bootstrapSource()})
	s := c.config(context.Background())
	for _, cs := range s.schemas {
		if cs.fs.Name == "global-default" && cs.maxSeats != 8 {
			t.Errorf("global-default's bound: %d, want 8", cs.maxSeats)
		}
	}
}

func TestWriteWorkByWatches(t *testing.T) {
	c := New(Config{Source: bootstrapSource()})
	watch := func(path string, n int) []watchKey {
		var keys []watchKey
		for i := 0; i < n; i++ {
			req := httptest.NewRequest("GET", path, nil)
			a := authorizer.RequestAttributes(req, nil)
			if k, ok := c.watches.register(&a); ok {
				keys = append(keys, k)
			}
		}
		return keys
	}
	write := func(method, path string) estimate { return estimateOf(c, method, path, 0) }
	if got := write("POST", "/api/v1/namespaces/team/configmaps"); got != oneSeat {
		t.Errorf("no watches: %+v", got)
	}
	all := watch("/api/v1/configmaps?watch=true", 5)
	team := watch("/api/v1/namespaces/team/configmaps?watch=true", 4)
	if got := write("POST", "/api/v1/namespaces/team/configmaps"); got != oneSeat {
		t.Errorf("9 watches: %+v", got)
	}
	one := watch("/api/v1/namespaces/team/configmaps?watch=true&fieldSelector=metadata.name%3Dx", 16)
	// 25 watches see a write of team/x: 3 seats of fan-out for 5 ms.
	if got, want := write("PUT", "/api/v1/namespaces/team/configmaps/x"), (estimate{seats: 1, finalSeats: 3, additional: 5 * time.Millisecond}); got != want {
		t.Errorf("25 watches: %+v, want %+v", got, want)
	}
	// A create has no name: 9 of them; another namespace sees only the 5.
	if got := write("POST", "/api/v1/namespaces/team/configmaps"); got != oneSeat {
		t.Errorf("create, 9 watches: %+v", got)
	}
	if got := write("DELETE", "/api/v1/namespaces/other/configmaps/x"); got != oneSeat {
		t.Errorf("other namespace: %+v", got)
	}
	// 250 watches: 25 seats' worth, narrowed to 10 for 12.5 ms.
	many := watch("/api/v1/configmaps?watch=true", 225)
	if got, want := write("PATCH", "/api/v1/namespaces/team/configmaps/x"), (estimate{seats: 1, finalSeats: 10, additional: 12500 * time.Microsecond}); got != want {
		t.Errorf("250 watches: %+v, want %+v", got, want)
	}
	if got := write("GET", "/api/v1/namespaces/team/configmaps/x"); got != oneSeat {
		t.Errorf("a read: %+v", got)
	}
	for _, k := range append(append(append(all, team...), one...), many...) {
		c.watches.forget(k)
	}
	if got := write("PATCH", "/api/v1/namespaces/team/configmaps/x"); got != oneSeat || len(c.watches.counts) != 0 {
		t.Errorf("after the watches ended: %+v, %d keys", got, len(c.watches.counts))
	}
	// A kubelet's watch of its node's pods is not counted; the token subresource
	// makes no event.
	if keys := watch("/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dn1", 20); len(keys) != 0 {
		t.Errorf("node-scoped pod watches counted: %d", len(keys))
	}
	watch("/api/v1/namespaces/team/serviceaccounts?watch=true", 20)
	if got := write("POST", "/api/v1/namespaces/team/serviceaccounts/default/token"); got != oneSeat {
		t.Errorf("token request: %+v", got)
	}
}

// TestHandlerHoldsEstimatedSeats runs requests through the filter with the next
// handler blocked and reads the seats their level has in use.
func TestHandlerHoldsEstimatedSeats(t *testing.T) {
	c := New(Config{Source: bootstrapSource(), Objects: fakeCounts{configMaps: 5000}})
	// The next handler hands the test a channel whose close lets it return.
	entered := make(chan chan struct{})
	h := c.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		unblock := make(chan struct{})
		entered <- unblock
		<-unblock
	}))
	bob := &filters.User{Name: "bob", Groups: []string{"system:authenticated"}}
	ctx := context.Background()
	// serve starts a request and returns, once it is in the next handler, what ends it.
	serve := func(method, path string) (end func()) {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.ServeHTTP(httptest.NewRecorder(), request(method, path, bob))
		}()
		unblock := <-entered
		return func() {
			close(unblock)
			wg.Wait()
		}
	}
	// A list of 5000 configmaps from bob: global-default's bound of 8 seats.
	done := serve("GET", "/api/v1/namespaces/team/configmaps?resourceVersion=0")
	if st := c.Stats(ctx)["global-default"]; st.InUse != 8 || st.Executing != 1 {
		t.Errorf("during the list: %+v, want 8 seats in use", st)
	}
	done()
	// Twelve watches of configmaps hold no seat while they last, and count in the
	// fan-out of a write, which holds 2 seats while it executes.
	var watches []func()
	for i := 0; i < 12; i++ {
		watches = append(watches, serve("GET", "/api/v1/configmaps?watch=true"))
	}
	if st := c.Stats(ctx)["global-default"]; st.InUse != 0 {
		t.Errorf("during the watches: %+v, want no seat in use", st)
	}
	done = serve("PUT", "/api/v1/namespaces/team/configmaps/x")
	if st := c.Stats(ctx)["global-default"]; st.InUse != 2 {
		t.Errorf("during a write seen by 12 watches: %+v, want 2 seats in use", st)
	}
	done()
	for _, end := range watches {
		end()
	}
	if n := c.watches.interested(&authorizer.Attributes{Verb: "update", Resource: "configmaps", Namespace: "team", Name: "x"}); n != 0 {
		t.Errorf("watches counted after they ended: %d", n)
	}
}
