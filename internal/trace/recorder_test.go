package trace

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

func TestRingKeepsTheNewestWithinCapacity(t *testing.T) {
	r := New(Config{Capacity: 100, Shards: 4})
	for i := 0; i < 1000; i++ {
		r.Add(&Record{Type: TypeRequest, Resource: "pods", Namespace: "default", Name: "p"})
		r.Add(&Record{Type: TypeRequest, Resource: "services", Namespace: "default", Name: "s"})
	}
	pods := r.Records(Query{Resource: "pods"})
	if len(pods) != 100 {
		t.Fatalf("kept %d pod records, want 100", len(pods))
	}
	// The newest 100 pod records are the odd sequence numbers 1801..1999.
	for i, rec := range pods {
		if want := uint64(1801 + 2*i); rec.Seq != want {
			t.Fatalf("record %d has seq %d, want %d", i, rec.Seq, want)
		}
	}
	if n := len(r.Records(Query{})); n != 200 {
		t.Fatalf("kept %d records over both resources, want 200 (one ring per resource)", n)
	}
}

func TestQuerySelectsObjectsAndUIDs(t *testing.T) {
	r := New(Config{})
	r.Add(&Record{Resource: "pods", Namespace: "a", Name: "x", UID: "u1"})
	r.Add(&Record{Resource: "pods", Namespace: "b", Name: "x"})
	r.Add(&Record{Resource: "deployments.apps", Namespace: "a", Name: "x"})
	r.Add(&Record{Resource: "pods", Namespace: "a", Name: "y", UID: "u2"})
	got := r.Records(Query{Objects: []ObjectRef{{Resource: "pods", Namespace: "a", Name: "x"}}, UIDs: []string{"u2"}})
	if len(got) != 2 || got[0].Name != "x" || got[1].Name != "y" {
		t.Fatalf("got %+v", got)
	}
	if got := r.Records(Query{Namespace: "a", AfterSeq: 1}); len(got) != 2 {
		t.Fatalf("namespace a after seq 1: got %d records, want 2", len(got))
	}
}

func TestQueryByUIDFindsRequestsThroughTheirWrite(t *testing.T) {
	r := New(Config{})
	r.Add(&Record{Type: TypeRequest, Verb: "create", Resource: "pods", Namespace: "a", Name: "web-x", Revision: 7})
	r.Add(&Record{Type: TypeDelivery, Resource: "pods", Namespace: "a", Name: "web-x", UID: "u1", Revision: 7, EventType: "ADDED"})
	r.Add(&Record{Type: TypeRequest, Verb: "create", Resource: "pods", Namespace: "a", Name: "other", Revision: 8})
	got := r.Records(Query{UIDs: []string{"u1"}})
	if len(got) != 2 || got[0].Type != TypeRequest || got[0].UID != "u1" {
		t.Fatalf("got %+v, want the create (with the uid of its write) and the delivery", got)
	}
}

func TestConcurrentAddAndRead(t *testing.T) {
	r := New(Config{Capacity: 64, Shards: 8})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				r.Add(&Record{Resource: "pods", Name: "p"})
				if i%100 == 0 {
					_ = r.Records(Query{Resource: "pods"})
				}
			}
		}()
	}
	wg.Wait()
	recs := r.Records(Query{})
	if len(recs) != 64 {
		t.Fatalf("kept %d records, want 64", len(recs))
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Time.Before(recs[i-1].Time) {
			t.Fatalf("records out of time order at %d", i)
		}
	}
}

func TestServeHTTP(t *testing.T) {
	r := New(Config{})
	r.Add(&Record{Resource: "pods", Namespace: "default", Name: "web-1", Verb: "create", Code: 201})
	r.Add(&Record{Resource: "pods", Namespace: "default", Name: "web-2"})
	srv := httptest.NewServer(r)
	defer srv.Close()
	resp, err := http.Get(srv.URL + Endpoint + "?object=pods/default/web-1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got Response
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if len(got.Records) != 1 || got.Records[0].Name != "web-1" || got.Records[0].Code != 201 {
		t.Fatalf("got %+v", got.Records)
	}
	bad, err := http.Get(srv.URL + Endpoint + "?object=nonsense")
	if err != nil {
		t.Fatal(err)
	}
	bad.Body.Close()
	if bad.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad object: status %d, want 400", bad.StatusCode)
	}
}

// BenchmarkAdd measures one record call as the API server makes it, from parallel requests.
func BenchmarkAdd(b *testing.B) {
	r := New(Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		rec := Record{Type: TypeRequest, User: "system:kube-controller-manager", Verb: "create", Method: "POST",
			Path: "/api/v1/namespaces/default/pods", Resource: "pods", Namespace: "default", Name: "web-1", Code: 201}
		for pb.Next() {
			rec.Time = time.Time{}
			r.Add(&rec)
		}
	})
}
