package expectations

import (
	"fmt"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestControllerExpectations(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	e := NewControllerExpectationsWithClock(clk)
	const key = "ns/rs"

	if !e.SatisfiedExpectations(key) {
		t.Fatal("no expectations: not satisfied")
	}
	e.ExpectCreations(key, 2)
	if e.SatisfiedExpectations(key) {
		t.Fatal("2 creations outstanding: satisfied")
	}
	e.CreationObserved(key)
	if e.SatisfiedExpectations(key) {
		t.Fatal("1 creation outstanding: satisfied")
	}
	e.CreationObserved(key)
	if !e.SatisfiedExpectations(key) {
		t.Fatal("all creations observed: not satisfied")
	}
	if add, del, ok := e.GetExpectations(key); !ok || add != 0 || del != 0 {
		t.Fatalf("GetExpectations = %d, %d, %v", add, del, ok)
	}

	e.ExpectDeletions(key, 1)
	e.RaiseExpectations(key, 1, 0)
	if add, del, _ := e.GetExpectations(key); add != 1 || del != 1 {
		t.Fatalf("after raise: %d, %d", add, del)
	}
	e.LowerExpectations(key, 1, 1)
	if !e.SatisfiedExpectations(key) {
		t.Fatal("lowered to zero: not satisfied")
	}

	e.ExpectCreations(key, 1)
	clk.SetTime(clk.Now().Add(Timeout))
	if e.SatisfiedExpectations(key) {
		t.Fatal("exactly Timeout old: satisfied")
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if !e.SatisfiedExpectations(key) {
		t.Fatal("expired: not satisfied")
	}

	e.ExpectCreations(key, 1)
	e.DeleteExpectations(key)
	if _, _, ok := e.GetExpectations(key); ok || !e.SatisfiedExpectations(key) {
		t.Fatal("deleted expectations still there")
	}
	e.CreationObserved(key) // no expectations: must not create any
	if _, _, ok := e.GetExpectations(key); ok {
		t.Fatal("observation created expectations")
	}
}

func TestUIDTrackingExpectations(t *testing.T) {
	u := NewUIDTrackingControllerExpectations(NewControllerExpectations())
	const key = "ns/rs"
	u.ExpectDeletions(key, []string{"ns/a", "ns/b"})
	if u.SatisfiedExpectations(key) {
		t.Fatal("deletions outstanding: satisfied")
	}
	u.DeletionObserved(key, "ns/a")
	u.DeletionObserved(key, "ns/a") // the update with deletionTimestamp, then the delete
	u.DeletionObserved(key, "ns/other")
	if _, del, _ := u.GetExpectations(key); del != 1 {
		t.Fatalf("del = %d, want 1", del)
	}
	if got := u.GetUIDs(key); got.Len() != 1 || !got.Has("ns/b") {
		t.Fatalf("GetUIDs = %v", got)
	}
	u.DeletionObserved(key, "ns/b")
	if !u.SatisfiedExpectations(key) {
		t.Fatal("all deletions observed: not satisfied")
	}
	u.ExpectCreations(key, 1)
	u.CreationObserved(key)
	if !u.SatisfiedExpectations(key) {
		t.Fatal("creation observed: not satisfied")
	}
	u.ExpectDeletions(key, []string{"ns/c"})
	u.DeleteExpectations(key)
	if u.GetUIDs(key) != nil || !u.SatisfiedExpectations(key) {
		t.Fatal("DeleteExpectations kept state")
	}
}

func TestConcurrentObservations(t *testing.T) {
	u := NewUIDTrackingControllerExpectations(NewControllerExpectations())
	const n = 200
	var keys []string
	for i := range n {
		keys = append(keys, fmt.Sprintf("ns/p%d", i))
	}
	u.ExpectDeletions("ns/rs", keys)
	u.counts.RaiseExpectations("ns/rs", n, 0)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(2)
		go func() { defer wg.Done(); u.DeletionObserved("ns/rs", keys[i]) }()
		go func() { defer wg.Done(); u.CreationObserved("ns/rs"); _ = u.SatisfiedExpectations("ns/rs") }()
	}
	wg.Wait()
	if add, del, _ := u.GetExpectations("ns/rs"); add != 0 || del != 0 {
		t.Fatalf("after concurrent observations: add %d del %d", add, del)
	}
}
