package flowcontrol

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/apiserver/filters"
)

// BenchmarkHandler measures the filter's fast path (classification over upstream's
// bootstrap configuration, the work estimate, free seats) for a list by a user that
// falls through to global-default, the deepest match, from parallel goroutines; it reports requests/s and the p99 of
// the time spent in the filter.
func BenchmarkHandler(b *testing.B) {
	for _, tc := range []struct {
		name    string
		user    *filters.User
		objects ObjectCounter
	}{
		{"global-default", &filters.User{Name: "bob", Groups: []string{"system:authenticated"}}, nil},
		// The list's width from an object count (50 configmaps: one seat).
		{"global-default-counted", &filters.User{Name: "bob", Groups: []string{"system:authenticated"}}, fakeCounts{configMaps: 50}},
		{"exempt", &filters.User{Name: "admin", Groups: []string{"system:masters", "system:authenticated"}}, nil},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := New(Config{Source: bootstrapSource(), Objects: tc.objects})
			h := c.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			var mu sync.Mutex
			var lat []time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				req := request("GET", "/api/v1/namespaces/team/configmaps", tc.user)
				w := httptest.NewRecorder()
				local := make([]time.Duration, 0, 1024)
				for pb.Next() {
					t0 := time.Now()
					h.ServeHTTP(w, req)
					local = append(local, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, local...)
				mu.Unlock()
			})
			elapsed := time.Since(start)
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
		})
	}
}
