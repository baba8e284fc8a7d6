package trace

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultCapacity is how many records each resource's ring keeps by default.
const DefaultCapacity = 10000

// Config configures a Recorder.
type Config struct {
	// Capacity is how many records each resource keeps (default DefaultCapacity); the
	// oldest are dropped first.
	Capacity int
	// Shards is how many independently locked parts each ring has (default 8), so that
	// concurrent requests on one resource rarely wait for each other.
	Shards int
	// Now returns the current time (default time.Now).
	Now func() time.Time
}

// Recorder keeps the most recent records of every resource in bounded rings. It is
// safe for concurrent use; Add takes one short, usually uncontended lock and allocates
// only while a resource's ring grows towards its capacity (amortised, as append).
type Recorder struct {
	cfg   Config
	seq   atomic.Uint64
	rings sync.Map // resource → *ring
}

// New returns a Recorder.
func New(cfg Config) *Recorder {
	if cfg.Capacity <= 0 {
		cfg.Capacity = DefaultCapacity
	}
	if cfg.Shards <= 0 {
		cfg.Shards = 8
	}
	if cfg.Shards > cfg.Capacity {
		cfg.Shards = cfg.Capacity
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Recorder{cfg: cfg}
}

// Now returns the recorder's current time.
func (r *Recorder) Now() time.Time { return r.cfg.Now() }

// ring is one resource's records, split in shards by sequence number.
type ring struct {
	next   atomic.Uint64 // spreads appends over the shards evenly
	shards []shard
}

type shard struct {
	mu   sync.Mutex
	buf  []Record // grows to cap records, then wraps
	cap  int
	next int      // where the next record goes once buf is full
	_    [32]byte // keep neighbouring shards' locks off one cache line
}

func (r *Recorder) ring(resource string) *ring {
	if v, ok := r.rings.Load(resource); ok {
		return v.(*ring)
	}
	per := (r.cfg.Capacity + r.cfg.Shards - 1) / r.cfg.Shards
	rg := &ring{shards: make([]shard, r.cfg.Shards)}
	for i := range rg.shards {
		// Memory follows use: a resource with few requests keeps a small buffer.
		rg.shards[i].buf = make([]Record, 0, min(per, 16))
		rg.shards[i].cap = per
	}
	v, _ := r.rings.LoadOrStore(resource, rg)
	return v.(*ring)
}

// Add stores a copy of rec, setting its Seq (and its Time when zero).
func (r *Recorder) Add(rec *Record) {
	seq := r.seq.Add(1)
	rec.Seq = seq
	if rec.Time.IsZero() {
		rec.Time = r.cfg.Now()
	}
	rg := r.ring(rec.Resource)
	sh := &rg.shards[rg.next.Add(1)%uint64(len(rg.shards))]
	sh.mu.Lock()
	if len(sh.buf) < sh.cap {
		sh.buf = append(sh.buf, *rec)
	} else {
		sh.buf[sh.next] = *rec
		if sh.next++; sh.next == len(sh.buf) {
			sh.next = 0
		}
	}
	sh.mu.Unlock()
}

// Query selects records. A record matches when it is about one of Objects, or has one
// of UIDs, or (when neither is given) lies in Namespace and Resource (empty: any).
type Query struct {
	Objects   []ObjectRef
	UIDs      []string
	Namespace string
	Resource  string
	// AfterSeq skips records up to and including this sequence number.
	AfterSeq uint64
}

func (q *Query) match(rec *Record) bool {
	if rec.Seq <= q.AfterSeq {
		return false
	}
	if len(q.Objects) == 0 && len(q.UIDs) == 0 {
		return (q.Namespace == "" || rec.Namespace == q.Namespace) && (q.Resource == "" || rec.Resource == q.Resource)
	}
	for _, o := range q.Objects {
		if o.Resource == rec.Resource && o.Namespace == rec.Namespace && o.Name == rec.Name {
			return true
		}
	}
	for _, u := range q.UIDs {
		if u != "" && u == rec.UID {
			return true
		}
	}
	return false
}

// Records returns the matching records in time order (a request's time is its start,
// so a request comes before the deliveries of its write although it is recorded when it
// ends), Seq breaking ties. Requests carry no UID (the request path names the object,
// the storage write its key); the watch deliveries of the write's revision do, and
// Records copies it to the request, so that a query by UID finds the requests too.
func (r *Recorder) Records(q Query) []Record {
	if len(q.UIDs) > 0 {
		uids := map[string]bool{}
		for _, u := range q.UIDs {
			uids[u] = true
		}
		seen := map[ObjectRef]bool{}
		r.scan(func(rec *Record) {
			if rec.UID != "" && uids[rec.UID] && !seen[rec.Ref()] {
				seen[rec.Ref()] = true
				q.Objects = append(q.Objects, rec.Ref())
			}
		})
	}
	var out []Record
	type write struct {
		ref ObjectRef
		rev int64
	}
	uidOf := map[write]string{}
	r.scan(func(rec *Record) {
		if q.match(rec) {
			out = append(out, *rec)
			if rec.Type == TypeDelivery && rec.UID != "" {
				uidOf[write{rec.Ref(), rec.Revision}] = rec.UID
			}
		}
	})
	for i := range out {
		if out[i].UID == "" && out[i].Type == TypeRequest && out[i].Revision != 0 {
			out[i].UID = uidOf[write{out[i].Ref(), out[i].Revision}]
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.Before(out[j].Time)
		}
		return out[i].Seq < out[j].Seq
	})
	return out
}

// scan calls f for every stored record, holding each shard's lock in turn.
func (r *Recorder) scan(f func(*Record)) {
	r.rings.Range(func(k, v any) bool {
		rg := v.(*ring)
		for i := range rg.shards {
			sh := &rg.shards[i]
			sh.mu.Lock()
			for j := range sh.buf {
				f(&sh.buf[j])
			}
			sh.mu.Unlock()
		}
		return true
	})
}

// Response is the JSON the trace endpoint serves.
type Response struct {
	Records []Record `json:"records"`
}

// ParseObjectRef reads resource/namespace/name or resource/name.
func ParseObjectRef(s string) (ObjectRef, error) {
	parts := strings.Split(s, "/")
	switch {
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return ObjectRef{Resource: parts[0], Name: parts[1]}, nil
	case len(parts) == 3 && parts[0] != "" && parts[1] != "" && parts[2] != "":
		return ObjectRef{Resource: parts[0], Namespace: parts[1], Name: parts[2]}, nil
	}
	return ObjectRef{}, fmt.Errorf("object %q: want resource/namespace/name or resource/name", s)
}

// QueryFromURL reads a Query from the endpoint's parameters: object (repeated,
// resource/namespace/name), uid (repeated), namespace, resource and after.
func QueryFromURL(v map[string][]string) (Query, error) {
	var q Query
	for _, s := range v["object"] {
		o, err := ParseObjectRef(s)
		if err != nil {
			return Query{}, err
		}
		q.Objects = append(q.Objects, o)
	}
	q.UIDs = v["uid"]
	if ns := v["namespace"]; len(ns) > 0 {
		q.Namespace = ns[0]
	}
	if res := v["resource"]; len(res) > 0 {
		q.Resource = res[0]
	}
	if a := v["after"]; len(a) > 0 && a[0] != "" {
		n, err := strconv.ParseUint(a[0], 10, 64)
		if err != nil {
			return Query{}, fmt.Errorf("after %q: %w", a[0], err)
		}
		q.AfterSeq = n
	}
	return q, nil
}

// ServeHTTP answers GET with the records the URL's query selects, as JSON
// (see QueryFromURL). It does no authentication: mount it behind the server's filters.
func (r *Recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet {
		http.Error(w, "only GET", http.StatusMethodNotAllowed)
		return
	}
	q, err := QueryFromURL(req.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	recs := r.Records(q)
	if recs == nil {
		recs = []Record{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(Response{Records: recs})
}
