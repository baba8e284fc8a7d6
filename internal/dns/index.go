package dns

import (
	"strings"
	"sync"

	"github.com/miekg/dns"
)

// index holds the records of every Service, replaced one Service at a time.
// It is safe for concurrent use: queries take a read lock, updates a write
// lock. Records in it are never modified once stored; readers copy them
// before changing a header.
type index struct {
	zone string

	mu       sync.RWMutex
	services map[string]recordSet           // Service key → its records
	names    map[string]map[string][]dns.RR // owner → Service key → records
	ents     map[string]int                 // empty non-terminals in the zone → owners below them
	serial   uint32
}

func newIndex(zone string, serial uint32) *index {
	return &index{
		zone:     zone,
		services: map[string]recordSet{},
		names:    map[string]map[string][]dns.RR{},
		ents:     map[string]int{},
		serial:   serial,
	}
}

// set replaces the records of the Service key with rs; an empty rs removes
// the Service.
func (ix *index) set(key string, rs recordSet) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for owner := range ix.services[key] {
		byKey := ix.names[owner]
		delete(byKey, key)
		if len(byKey) == 0 {
			delete(ix.names, owner)
		}
		ix.walkENTs(owner, -1)
	}
	delete(ix.services, key)
	if len(rs) > 0 {
		ix.services[key] = rs
		for owner, rrs := range rs {
			byKey := ix.names[owner]
			if byKey == nil {
				byKey = map[string][]dns.RR{}
				ix.names[owner] = byKey
			}
			byKey[key] = rrs
			ix.walkENTs(owner, +1)
		}
	}
	ix.serial++
}

// walkENTs adds delta to the count of every name strictly between owner and
// the zone apex.
func (ix *index) walkENTs(owner string, delta int) {
	if !dns.IsSubDomain(ix.zone, owner) {
		return
	}
	name := owner
	for {
		i := strings.IndexByte(name, '.')
		if i < 0 || i+1 >= len(name) {
			return
		}
		name = name[i+1:]
		if len(name) <= len(ix.zone) {
			return
		}
		if ix.ents[name] += delta; ix.ents[name] <= 0 {
			delete(ix.ents, name)
		}
	}
}

// lookup returns the records owned by name (lower-case, fully qualified) and
// whether the name exists: it owns records, belongs to a Service, or has
// names below it.
func (ix *index) lookup(name string) ([]dns.RR, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	byKey, ok := ix.names[name]
	if !ok {
		return nil, ix.ents[name] > 0
	}
	var out []dns.RR
	for _, rrs := range byKey {
		out = append(out, rrs...)
	}
	return out, true
}

// soaSerial is the zone's serial: it grows with every change.
func (ix *index) soaSerial() uint32 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.serial
}
