package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

// sample is one line of the Prometheus text exposition format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape is one read of the server's /metrics.
type scrape []sample

// fetchMetrics reads the API server's /metrics in the text format.
func fetchMetrics(ctx context.Context, rc rest.Interface) (scrape, error) {
	raw, err := rc.Get().AbsPath("/metrics").SetHeader("Accept", "text/plain;version=0.0.4").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("get /metrics: %w", err)
	}
	return parseMetrics(string(raw))
}

// parseMetrics parses the Prometheus text format; comments are skipped.
func parseMetrics(text string) (scrape, error) {
	var out scrape
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("parse /metrics line %q: %w", line, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read /metrics: %w", err)
	}
	return out, nil
}

func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value")
	}
	s.name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for {
			line = strings.TrimLeft(line, " ,")
			if line == "" {
				return s, fmt.Errorf("unterminated label set")
			}
			if line[0] == '}' {
				line = line[1:]
				break
			}
			eq := strings.Index(line, `="`)
			if eq < 0 {
				return s, fmt.Errorf("malformed label")
			}
			key := line[:eq]
			line = line[eq+2:]
			var val strings.Builder
			j := 0
			for ; j < len(line) && line[j] != '"'; j++ {
				if line[j] == '\\' && j+1 < len(line) {
					j++
					switch line[j] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(line[j])
					}
					continue
				}
				val.WriteByte(line[j])
			}
			if j == len(line) {
				return s, fmt.Errorf("unterminated label value")
			}
			s.labels[key] = val.String()
			line = line[j+1:]
		}
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, fmt.Errorf("value: %w", err)
	}
	s.value = v
	return s, nil
}

func (s sample) matches(name string, want map[string]string) bool {
	if s.name != name {
		return false
	}
	for k, v := range want {
		if s.labels[k] != v {
			return false
		}
	}
	return true
}

// sum adds up the samples of name whose labels include want.
func (sc scrape) sum(name string, want map[string]string) (float64, bool) {
	var total float64
	found := false
	for _, s := range sc {
		if s.matches(name, want) {
			total += s.value
			found = true
		}
	}
	return total, found
}

// bucket is one cumulative histogram bucket.
type bucket struct {
	le    float64
	count float64
}

// histogram returns the cumulative buckets of histogram name (summed over the
// series whose labels include want), in ascending order of their bounds.
func (sc scrape) histogram(name string, want map[string]string) []bucket {
	byLE := map[float64]float64{}
	for _, s := range sc {
		if !s.matches(name+"_bucket", want) {
			continue
		}
		le, err := strconv.ParseFloat(s.labels["le"], 64)
		if err != nil {
			continue
		}
		byLE[le] += s.value
	}
	out := make([]bucket, 0, len(byLE))
	for le, c := range byLE {
		out = append(out, bucket{le, c})
	}
	slices.SortFunc(out, func(a, b bucket) int { return cmpFloat(a.le, b.le) })
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// histogramDelta returns after − before for the buckets of one histogram.
func histogramDelta(before, after []bucket) []bucket {
	prev := map[float64]float64{}
	for _, b := range before {
		prev[b.le] = b.count
	}
	out := make([]bucket, len(after))
	for i, b := range after {
		out[i] = bucket{b.le, b.count - prev[b.le]}
	}
	return out
}

// quantile estimates the q-quantile (0..1) from cumulative buckets with linear
// interpolation inside the bucket, as PromQL's histogram_quantile does. It
// returns NaN without observations; a quantile in the +Inf bucket returns the
// largest finite bound.
func quantile(q float64, buckets []bucket) float64 {
	if len(buckets) == 0 {
		return math.NaN()
	}
	total := buckets[len(buckets)-1].count
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range buckets {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return lower
			}
			inBucket := b.count - below
			if inBucket <= 0 {
				return b.le
			}
			return lower + (b.le-lower)*(rank-below)/inBucket
		}
		lower, below = b.le, b.count
	}
	return lower
}
