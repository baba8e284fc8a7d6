package nftables

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// fixedSetNames are the sets and maps every ruleset has, in order, with
// their declarations in fixedSetSpecs.
var fixedSetNames = []string{MapServiceIPs, MapServiceNodePorts, MapNoEndpointServices, MapNoEndpointNodePorts, SetFirewallIPs, SetNodePortIPs, SetHairpin}

// Families of the endpoint maps: one map and one chain per family and
// endpoint count n (named family + n), created while some Service port
// with n endpoints uses it.
const (
	// FamilyEndpoints is traffic to a ClusterIP: key ClusterIP . protocol
	// . port . endpoint index.
	FamilyEndpoints = "endpoints-"
	// FamilyExternalEndpoints is traffic to an external or load-balancer
	// IP (masqueraded): key IP . protocol . port . endpoint index.
	FamilyExternalEndpoints = "external-endpoints-"
	// FamilyNodePortEndpoints is NodePort traffic (masqueraded): key
	// protocol . node port . endpoint index.
	FamilyNodePortEndpoints = "nodeport-endpoints-"
)

// endpointFamilies are the families in the order their maps and chains
// come in a Ruleset.
var endpointFamilies = []string{FamilyEndpoints, FamilyExternalEndpoints, FamilyNodePortEndpoints}

// EndpointMap names the endpoint map (and chain) of a family for port
// with n endpoints.
func EndpointMap(family string, n int) string { return family + strconv.Itoa(n) }

// parseEndpointMap splits an endpoint map's name into its family's index
// in endpointFamilies and n; ok is false for any other name.
func parseEndpointMap(name string) (family, n int, ok bool) {
	for i, f := range endpointFamilies {
		if rest, found := strings.CutPrefix(name, f); found {
			if n, err := strconv.Atoi(rest); err == nil && n > 0 {
				return i, n, true
			}
		}
	}
	return 0, 0, false
}

// compareShared orders the shared sets: the fixed ones in fixedSetNames'
// order, then the endpoint maps by family and endpoint count.
func compareShared(a, b string) int {
	ia, ib := slices.Index(fixedSetNames, a), slices.Index(fixedSetNames, b)
	switch {
	case ia >= 0 && ib >= 0:
		return cmp.Compare(ia, ib)
	case ia >= 0:
		return -1
	case ib >= 0:
		return 1
	}
	fa, na, _ := parseEndpointMap(a)
	fb, nb, _ := parseEndpointMap(b)
	return cmp.Or(cmp.Compare(fa, fb), cmp.Compare(na, nb))
}

// endpointMapChain is the chain of an endpoint map: NodePort and external
// traffic is marked for masquerading, then the packet is DNATed to the
// endpoint its key and a random index in [0, n) select. The protocol match
// gives nft the transport context the port translation needs.
func endpointMapChain(name string) Chain {
	f, n, _ := parseEndpointMap(name)
	mod := " . numgen random mod " + strconv.Itoa(n) + " map @" + name
	c := Chain{Name: name}
	if endpointFamilies[f] != FamilyEndpoints {
		c.Rules = append(c.Rules, "jump "+ChainMarkMasq)
	}
	if endpointFamilies[f] == FamilyNodePortEndpoints {
		c.Rules = append(c.Rules, "meta l4proto { tcp, udp, sctp } dnat ip to meta l4proto . th dport"+mod)
	} else {
		c.Rules = append(c.Rules, "meta l4proto { tcp, udp, sctp } dnat ip to ip daddr . meta l4proto . th dport"+mod)
	}
	return c
}

// sharedSet is the declaration of a fixed set or an endpoint map.
func sharedSet(name string) Set {
	if f, n, ok := parseEndpointMap(name); ok {
		key := "ip daddr . meta l4proto . th dport"
		if endpointFamilies[f] == FamilyNodePortEndpoints {
			key = "meta l4proto . th dport"
		}
		return Set{Name: name, Kind: "map", Spec: "typeof " + key + " . numgen random mod " + strconv.Itoa(n) + " : ip daddr . th dport"}
	}
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

// buildSharedSets builds the shared sets (the fixed ones and the endpoint
// maps in use) from every Service's elements: each key once, with the value
// of the first Service (in name order) holding it (two Services claiming
// one external IP and port is a misconfiguration; one element per key is
// what nft accepts).
func buildSharedSets(outs []*svcOut) []Set {
	names := slices.Clone(fixedSetNames)
	seen := map[string]bool{}
	for _, out := range outs {
		for name := range out.elems {
			if _, _, ok := parseEndpointMap(name); ok && !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	slices.SortFunc(names[len(fixedSetNames):], compareShared)
	sets := make([]Set, len(names))
	for i, name := range names {
		sets[i] = sharedSet(name)
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

// updateSharedSets returns prev's shared sets with the changed Services'
// elements taken out (old) and put in (new), without touching prev, and
// the delta per set: endpoint maps new Services use are added, those left
// empty dropped.
func updateSharedSets(prev []Set, changes []svcChange) ([]Set, map[string]elementDelta) {
	sets := slices.Clone(prev)
	added := false
	for _, c := range changes {
		if c.new == nil {
			continue
		}
		for name := range c.new.elems {
			if _, _, ok := parseEndpointMap(name); ok && !slices.ContainsFunc(sets, func(s Set) bool { return s.Name == name }) {
				sets = append(sets, sharedSet(name))
				added = true
			}
		}
	}
	if added {
		slices.SortFunc(sets[len(fixedSetNames):], func(a, b Set) int { return compareShared(a.Name, b.Name) })
	}
	delta := map[string]elementDelta{}
	for i := range sets {
		name := sets[i].Name
		prevEls := sets[i].Elements
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
		els := slices.Clone(prevEls) // holders are replaced, never changed in place
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
			oldEl, wasThere := lookup(prevEls, k)
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
	sets = slices.DeleteFunc(sets, func(s Set) bool {
		_, _, ok := parseEndpointMap(s.Name)
		return ok && len(s.Elements) == 0
	})
	return sets, delta
}

func lookup(els []Element, key string) (Element, bool) {
	j, ok := slices.BinarySearchFunc(els, key, func(e Element, k string) int { return cmp.Compare(e.Key, k) })
	if !ok {
		return Element{}, false
	}
	return els[j], true
}
