// Package logquery reads the query of the kubelet API's /containerLogs endpoint
// (follow, previous, timestamps, tailLines, sinceSeconds, sinceTime, limitBytes) and
// validates it as upstream's PodLogOptions: the one parser of the real kubelet's server
// and of the simulated nodes' kubelet port.
package logquery

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// Options are the query parameters of /containerLogs, as upstream's v1.PodLogOptions.
type Options struct {
	Follow     bool
	Previous   bool
	Timestamps bool
	// TailLines, when set, starts at the n-th last line.
	TailLines *int64
	// SinceTime, when set, skips entries older than it (sinceSeconds is turned into it).
	SinceTime *time.Time
	// LimitBytes, when set, stops after that many bytes of output.
	LimitBytes *int64
}

// Parse reads the query parameters follow, previous, timestamps, tailLines,
// sinceSeconds, sinceTime and limitBytes, validating them as upstream (non-negative tailLines,
// positive sinceSeconds and limitBytes, at most one of sinceSeconds and sinceTime). now turns
// sinceSeconds into a time.
func Parse(q url.Values, now time.Time) (Options, error) {
	var o Options
	var err error
	for name, dst := range map[string]*bool{"follow": &o.Follow, "previous": &o.Previous, "timestamps": &o.Timestamps} {
		if v := q.Get(name); v != "" {
			if *dst, err = strconv.ParseBool(v); err != nil {
				return o, fmt.Errorf("%s: invalid boolean %q", name, v)
			}
		}
	}
	intParam := func(name string) (*int64, error) {
		v := q.Get(name)
		if v == "" {
			return nil, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: invalid integer %q", name, v)
		}
		return &n, nil
	}
	if o.TailLines, err = intParam("tailLines"); err != nil {
		return o, err
	}
	if o.TailLines != nil && *o.TailLines < 0 {
		return o, fmt.Errorf("tailLines: Invalid value: %d: must be greater than or equal to 0", *o.TailLines)
	}
	if o.LimitBytes, err = intParam("limitBytes"); err != nil {
		return o, err
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		return o, fmt.Errorf("limitBytes: Invalid value: %d: must be greater than 0", *o.LimitBytes)
	}
	since, err := intParam("sinceSeconds")
	if err != nil {
		return o, err
	}
	sinceTime := q.Get("sinceTime")
	switch {
	case since != nil && sinceTime != "":
		return o, errors.New("at most one of `sinceTime` or `sinceSeconds` may be specified")
	case since != nil:
		if *since < 1 {
			return o, fmt.Errorf("sinceSeconds: Invalid value: %d: must be greater than 0", *since)
		}
		t := now.Add(-time.Duration(*since) * time.Second)
		o.SinceTime = &t
	case sinceTime != "":
		t, err := time.Parse(time.RFC3339, sinceTime)
		if err != nil {
			return o, fmt.Errorf("sinceTime: invalid time %q: %w", sinceTime, err)
		}
		o.SinceTime = &t
	}
	return o, nil
}
