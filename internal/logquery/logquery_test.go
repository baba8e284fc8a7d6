package logquery

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestParse covers each parameter and upstream's PodLogOptions rules.
func TestParse(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	o, err := Parse(url.Values{"follow": {"true"}, "timestamps": {"1"}, "tailLines": {"0"}, "limitBytes": {"10"}, "sinceSeconds": {"60"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !o.Follow || o.Previous || !o.Timestamps || *o.TailLines != 0 || *o.LimitBytes != 10 || !o.SinceTime.Equal(now.Add(-time.Minute)) {
		t.Errorf("parsed %+v", o)
	}
	o, err = Parse(url.Values{"sinceTime": {"2026-12-01T11:00:00Z"}, "previous": {"true"}}, now)
	if err != nil || !o.Previous || !o.SinceTime.Equal(now.Add(-time.Hour)) || o.TailLines != nil || o.LimitBytes != nil {
		t.Errorf("parsed %+v, %v", o, err)
	}
	for q, want := range map[string]string{
		"follow=maybe":   "follow: invalid boolean",
		"tailLines=-1":   "tailLines: Invalid value: -1",
		"tailLines=x":    "tailLines: invalid integer",
		"limitBytes=0":   "limitBytes: Invalid value: 0: must be greater than 0",
		"sinceSeconds=0": "sinceSeconds: Invalid value: 0",
		"sinceSeconds=5&sinceTime=2026-12-01T11:00:00Z": "at most one of `sinceTime` or `sinceSeconds`",
		"sinceTime=yesterday":                           "sinceTime: invalid time",
	} {
		v, _ := url.ParseQuery(q)
		if _, err := Parse(v, now); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", q, err, want)
		}
	}
}
