package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/bench/internal/benchutil"
)

// scrape holds the series of one read of the API server's /metrics that the
// bench uses: request counts and latency sums by verb, resource, subresource
// and code, and the process's CPU time and resident memory.
type scrape struct {
	at       time.Time
	requests map[requestKey]float64 // apiserver_request_total
	latSum   map[requestKey]float64 // apiserver_request_duration_seconds_sum (code empty)
	latCount map[requestKey]float64 // apiserver_request_duration_seconds_count (code empty)
	cpu      float64                // process_cpu_seconds_total
	rss      float64                // process_resident_memory_bytes
}

// requestKey names one series of apiserver_request_total.
type requestKey struct {
	verb, resource, subresource, code string
}

// fetchMetrics reads the API server's /metrics in the text format.
func fetchMetrics(ctx context.Context, rc rest.Interface) (*scrape, error) {
	raw, err := rc.Get().AbsPath("/metrics").SetHeader("Accept", "text/plain;version=0.0.4").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("get /metrics: %w", err)
	}
	s := &scrape{at: time.Now(), requests: map[requestKey]float64{}, latSum: map[requestKey]float64{}, latCount: map[requestKey]float64{}}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("parse /metrics line %q: %w", line, err)
		}
		key := requestKey{labels["verb"], labels["resource"], labels["subresource"], labels["code"]}
		switch name {
		case "apiserver_request_total":
			s.requests[key] += value
		case "apiserver_request_duration_seconds_sum":
			s.latSum[key] += value
		case "apiserver_request_duration_seconds_count":
			s.latCount[key] += value
		case "process_cpu_seconds_total":
			s.cpu = value
		case "process_resident_memory_bytes":
			s.rss = value
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read /metrics: %w", err)
	}
	return s, nil
}

// parseSample splits one sample line of the text format into its name, labels
// and value; a timestamp after the value is ignored.
func parseSample(line string) (string, map[string]string, float64, error) {
	labels := map[string]string{}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return "", nil, 0, fmt.Errorf("no value")
	}
	name, rest := line[:i], line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if rest == "" {
				return "", nil, 0, fmt.Errorf("unterminated label set")
			}
			if rest[0] == '}' {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return "", nil, 0, fmt.Errorf("malformed label")
			}
			key := rest[:eq]
			rest = rest[eq+2:]
			var val strings.Builder
			j := 0
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' && j+1 < len(rest) {
					j++
					if rest[j] == 'n' {
						val.WriteByte('\n')
						continue
					}
				}
				val.WriteByte(rest[j])
			}
			if j == len(rest) {
				return "", nil, 0, fmt.Errorf("unterminated label value")
			}
			labels[key] = val.String()
			rest = rest[j+1:]
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", nil, 0, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", nil, 0, fmt.Errorf("value: %w", err)
	}
	return name, labels, v, nil
}

// requestRow is the traffic of one verb on one resource (and subresource)
// between two scrapes.
type requestRow struct {
	verb, resource string
	total          float64
	// byCode counts the responses that were not 2xx, by status code.
	byCode map[string]float64
	mean   time.Duration // server-side mean latency (0 for watches)
}

// requestDelta returns the requests the server answered between two scrapes,
// most frequent first; watches and the bench's own /metrics reads are left out.
func requestDelta(before, after *scrape) []requestRow {
	rows := map[[2]string]*requestRow{}
	for k, v := range after.requests {
		d := v - before.requests[k]
		if d <= 0 || k.verb == "watch" || k.resource == "" {
			continue
		}
		res := k.resource
		if k.subresource != "" {
			res += "/" + k.subresource
		}
		id := [2]string{k.verb, res}
		r := rows[id]
		if r == nil {
			r = &requestRow{verb: k.verb, resource: res, byCode: map[string]float64{}}
			lk := requestKey{verb: k.verb, resource: k.resource, subresource: k.subresource}
			if n := after.latCount[lk] - before.latCount[lk]; n > 0 {
				r.mean = time.Duration((after.latSum[lk] - before.latSum[lk]) / n * float64(time.Second))
			}
			rows[id] = r
		}
		r.total += d
		if !strings.HasPrefix(k.code, "2") {
			r.byCode[k.code] += d
		}
	}
	out := make([]*requestRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *requestRow) int {
		if c := cmp.Compare(b.total, a.total); c != 0 {
			return c
		}
		return cmp.Compare(a.verb+a.resource, b.verb+b.resource)
	})
	res := make([]requestRow, len(out))
	for i, r := range out {
		res[i] = *r
	}
	return res
}

// formatRequests prints rows as "create pods 1000 (mean 3.1ms), update
// pods/status 1000 (409×3)".
func formatRequests(rows []requestRow) string {
	parts := make([]string, 0, len(rows))
	for _, r := range rows {
		s := fmt.Sprintf("%s %s %.0f", r.verb, r.resource, r.total)
		var notes []string
		if r.mean > 0 {
			notes = append(notes, "mean "+benchutil.FormatDuration(r.mean))
		}
		codes := make([]string, 0, len(r.byCode))
		for c := range r.byCode {
			codes = append(codes, c)
		}
		slices.Sort(codes)
		for _, c := range codes {
			notes = append(notes, fmt.Sprintf("%s×%.0f", c, r.byCode[c]))
		}
		if len(notes) > 0 {
			s += " (" + strings.Join(notes, ", ") + ")"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
