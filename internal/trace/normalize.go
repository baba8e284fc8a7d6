package trace

import (
	"sort"
	"strconv"
	"strings"
	"time"
)

// kindAbbrev shortens kinds in normalised names.
var kindAbbrev = map[string]string{"ReplicaSet": "rs", "Pod": "pod", "EndpointSlice": "slice"}

// generatedNames are the kinds whose names a controller generates (a random suffix):
// Normalize renames them; Services, Endpoints and Ingresses keep the names users gave.
var generatedNames = map[string]bool{"ReplicaSet": true, "Pod": true, "EndpointSlice": true}

// Normalize returns a copy of in whose generated names, UIDs, times and revisions are
// replaced by stable ones, so that two runs of one flow render the same text: the root
// keeps its name, each owned object with a generated name is named after its owner
// (web-rs1, web-rs1-pod2, web-slice1),
// UIDs become uid-1, uid-2, ..., times count from the Unix epoch at the first record and
// revisions from 1.
func Normalize(in Input) Input {
	out := Input{Objects: append([]Object(nil), in.Objects...), Records: append([]Record(nil), in.Records...), Events: append([]Event(nil), in.Events...),
		PodIPs: append([]PodIP(nil), in.PodIPs...)}
	names := map[string]string{} // real → normalised
	uids := map[string]string{}
	byUID := map[string]string{} // uid → normalised name
	children := map[string]int{}
	for i := range out.Objects {
		o := &out.Objects[i]
		norm := o.Ref.Name
		if parent, ok := byUID[o.Owner]; ok && o.Owner != "" && generatedNames[o.Kind] {
			k := parent + "/" + o.Kind
			children[k]++
			abbrev := kindAbbrev[o.Kind]
			if abbrev == "" {
				abbrev = strings.ToLower(o.Kind)
			}
			norm = parent + "-" + abbrev + strconv.Itoa(children[k])
		}
		if _, ok := names[o.Ref.Name]; !ok || norm != o.Ref.Name {
			names[o.Ref.Name] = norm
		}
		if o.UID != "" {
			if _, ok := uids[o.UID]; !ok {
				uids[o.UID] = "uid-" + strconv.Itoa(len(uids)+1)
			}
			byUID[o.UID] = norm
		}
	}
	// Replace longer names first: a pod's name starts with its ReplicaSet's.
	var pairs []string
	keys := make([]string, 0, len(names)+len(uids))
	for k := range names {
		keys = append(keys, k)
	}
	for k := range uids {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return len(keys[i]) > len(keys[j]) || (len(keys[i]) == len(keys[j]) && keys[i] < keys[j])
	})
	for _, k := range keys {
		if v, ok := names[k]; ok {
			pairs = append(pairs, k, v)
		} else {
			pairs = append(pairs, k, uids[k])
		}
	}
	rep := strings.NewReplacer(pairs...)
	var first time.Time
	var minRev int64
	for _, r := range out.Records {
		if first.IsZero() || r.Time.Before(first) {
			first = r.Time
		}
		if r.Revision != 0 && (minRev == 0 || r.Revision < minRev) {
			minRev = r.Revision
		}
	}
	for _, e := range out.Events {
		if first.IsZero() || e.Time.Before(first) {
			first = e.Time
		}
	}
	epoch := time.Unix(0, 0).UTC()
	at := func(t time.Time) time.Time { return epoch.Add(t.Sub(first)) }
	for i := range out.Objects {
		o := &out.Objects[i]
		o.Ref.Name, o.UID, o.Owner = rep.Replace(o.Ref.Name), uids[o.UID], uids[o.Owner]
	}
	for i := range out.Records {
		r := &out.Records[i]
		r.Time = at(r.Time)
		r.Name, r.Path, r.Key, r.UID = rep.Replace(r.Name), rep.Replace(r.Path), rep.Replace(r.Key), rep.Replace(r.UID)
		if r.Revision != 0 {
			r.Revision -= minRev - 1
		}
	}
	for i := range out.PodIPs {
		out.PodIPs[i].Pod.Name = rep.Replace(out.PodIPs[i].Pod.Name)
	}
	for i := range out.Events {
		e := &out.Events[i]
		e.Time = at(e.Time)
		e.Object.Name, e.Name, e.Message = rep.Replace(e.Object.Name), rep.Replace(e.Name), rep.Replace(e.Message)
	}
	return out
}
