package nftables

import (
	"cmp"
	"slices"
)

// fixedSetNames are the sets and maps every ruleset has, in order, with
// their declarations in fixedSetSpecs.
var fixedSetNames = []string{MapServiceIPs, MapServiceNodePorts, MapNoEndpointServices, MapNoEndpointNodePorts, SetFirewallIPs, SetNodePortIPs, SetHairpin}

func fixedSet(name string) Set {
	switch name {
	case MapServiceIPs, MapNoEndpointServices:
		return Set{Name: name, Kind: "map", Spec: "type ipv4_addr . inet_proto . inet_service : verdict"}
	case MapServiceNodePorts, MapNoEndpointNodePorts:
		return Set{Name: name, Kind: "map", Spec: "type inet_proto . inet_service : verdict"}
	case SetFirewallIPs:
		return Set{Name: name, Kind: "set", Spec: "type ipv4_addr . inet_proto . inet_service"}
	case SetNodePortIPs:
		return Set{Name: name, Kind: "set", Spec: "type ipv4_addr"}
	default: // SetHairpin
		return Set{Name: name, Kind: "set", Spec: "type ipv4_addr . ipv4_addr"}
	}
}

// holder is one Service's claim on a key of a fixed set or map.
type holder struct {
	svc   svcKey
	value string
}

// svcChange is a Service whose output differs between two renders: old is
// nil for a new Service, new nil for a removed one.
type svcChange struct{ old, new *svcOut }

func (c svcChange) key() svcKey {
	if c.new != nil {
		return c.new.key
	}
	return c.old.key
}

// elementDelta is what changed in one fixed set: elements to delete (keys
// gone or values changed) and to add, each sorted by key.
type elementDelta struct{ del, add []Element }

// buildFixedSets builds the fixed sets from every Service's elements: each
// key once, with the value of the first Service (in name order) holding it
// (two Services claiming one external IP and port is a misconfiguration; one
// element per key is what nft accepts).
func buildFixedSets(outs []*svcOut) []Set {
	sets := make([]Set, len(fixedSetNames))
	for i, name := range fixedSetNames {
		sets[i] = fixedSet(name)
		type claim struct {
			key string
			ord int // the Service's place in name order
			h   holder
		}
		var claims []claim
		for ord, out := range outs { // in Service order
			for _, e := range out.elems[name] {
				claims = append(claims, claim{e.Key, ord, holder{out.key, e.Value}})
			}
		}
		slices.SortFunc(claims, func(a, b claim) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.ord, b.ord)) })
		// One backing array for the holders; each element's slice is capped,
		// so that adding a holder copies (updateFixedSets clones anyway).
		hs := make([]holder, len(claims))
		els := make([]Element, 0, len(claims))
		for j, c := range claims {
			hs[j] = c.h
			if n := len(els); n > 0 && els[n-1].Key == c.key {
				els[n-1].holders = hs[j-len(els[n-1].holders) : j+1 : j+1]
				continue
			}
			els = append(els, Element{Key: c.key, Value: c.h.value, holders: hs[j : j+1 : j+1]})
		}
		sets[i].Elements = els
	}
	return sets
}

// updateFixedSets returns prev's fixed sets with the changed Services'
// elements taken out (old) and put in (new), without touching prev, and
// the delta per set.
func updateFixedSets(prev []Set, changes []svcChange) ([]Set, map[string]elementDelta) {
	sets := make([]Set, len(prev))
	delta := map[string]elementDelta{}
	for i := range prev {
		sets[i] = prev[i]
		name := prev[i].Name
		touched := map[string]bool{}
		for _, c := range changes {
			if c.old != nil {
				for _, e := range c.old.elems[name] {
					touched[e.Key] = true
				}
			}
			if c.new != nil {
				for _, e := range c.new.elems[name] {
					touched[e.Key] = true
				}
			}
		}
		if len(touched) == 0 {
			continue
		}
		els := slices.Clone(prev[i].Elements) // holders are replaced, never changed in place
		find := func(key string) (int, bool) {
			return slices.BinarySearchFunc(els, key, func(e Element, k string) int { return cmp.Compare(e.Key, k) })
		}
		for _, c := range changes {
			if c.old != nil {
				for _, e := range c.old.elems[name] {
					j, ok := find(e.Key)
					if !ok {
						continue
					}
					hs := slices.DeleteFunc(slices.Clone(els[j].holders), func(h holder) bool { return h.svc == c.old.key })
					if len(hs) == 0 {
						els = slices.Delete(els, j, j+1)
						continue
					}
					els[j] = Element{Key: e.Key, Value: hs[0].value, holders: hs}
				}
			}
			if c.new != nil {
				for _, e := range c.new.elems[name] {
					h := holder{c.new.key, e.Value}
					j, ok := find(e.Key)
					if !ok {
						els = slices.Insert(els, j, Element{Key: e.Key, Value: e.Value, holders: []holder{h}})
						continue
					}
					hs := slices.Clone(els[j].holders)
					at, _ := slices.BinarySearchFunc(hs, h.svc, func(x holder, k svcKey) int { return x.svc.compare(k) })
					hs = slices.Insert(hs, at, h)
					els[j] = Element{Key: e.Key, Value: hs[0].value, holders: hs}
				}
			}
		}
		sets[i].Elements = els
		var d elementDelta
		keys := make([]string, 0, len(touched))
		for k := range touched {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			oldEl, wasThere := lookup(prev[i].Elements, k)
			newEl, isThere := lookup(els, k)
			switch {
			case wasThere && (!isThere || oldEl.Value != newEl.Value):
				d.del = append(d.del, oldEl)
				if isThere {
					d.add = append(d.add, newEl)
				}
			case !wasThere && isThere:
				d.add = append(d.add, newEl)
			}
		}
		if len(d.del) > 0 || len(d.add) > 0 {
			delta[name] = d
		}
	}
	return sets, delta
}

func lookup(els []Element, key string) (Element, bool) {
	j, ok := slices.BinarySearchFunc(els, key, func(e Element, k string) int { return cmp.Compare(e.Key, k) })
	if !ok {
		return Element{}, false
	}
	return els[j], true
}
