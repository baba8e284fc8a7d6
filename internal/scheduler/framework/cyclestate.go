package framework

import (
	"errors"
	"sync"
	"sync/atomic"
)

// ErrNotFound is returned by CycleState.Read for a missing key.
var ErrNotFound = errors.New("not found in cycle state")

// StateKey names one entry of the cycle state (by convention "PreFilter" + plugin name).
type StateKey string

// StateData is what plugins store in the cycle state.
type StateData interface {
	// Clone copies the data (a shallow copy is fine for data that is never changed).
	Clone() StateData
}

// CycleState holds plugin data for one pod's scheduling cycle. It is safe for
// concurrent use. Reads — many per node from the parallel Filter and Score calls —
// load an immutable list of entries with one atomic load and scan it (a cycle
// holds a handful of keys, so the scan beats hashing the key); writes, a few per
// cycle in PreFilter and PreScore, copy the list under a lock.
type CycleState struct {
	entries atomic.Pointer[[]stateEntry]
	mu      sync.Mutex // serialises writers
	// SkipFilterPlugins and SkipScorePlugins record the plugins whose PreFilter/PreScore said Skip.
	SkipFilterPlugins map[string]bool
	SkipScorePlugins  map[string]bool
}

// stateEntry is one key of a CycleState and its data.
type stateEntry struct {
	key  StateKey
	data StateData
}

// NewCycleState returns an empty state.
func NewCycleState() *CycleState {
	return &CycleState{SkipFilterPlugins: map[string]bool{}, SkipScorePlugins: map[string]bool{}}
}

// Read returns the data at key.
func (c *CycleState) Read(key StateKey) (StateData, error) {
	if p := c.entries.Load(); p != nil {
		for _, e := range *p {
			if e.key == key {
				return e.data, nil
			}
		}
	}
	return nil, ErrNotFound
}

// Write stores data at key.
func (c *CycleState) Write(key StateKey, data StateData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old []stateEntry
	if p := c.entries.Load(); p != nil {
		old = *p
	}
	next := make([]stateEntry, len(old), len(old)+1)
	copy(next, old)
	for i := range next {
		if next[i].key == key {
			next[i].data = data
			c.entries.Store(&next)
			return
		}
	}
	next = append(next, stateEntry{key: key, data: data})
	c.entries.Store(&next)
}

// Clone copies the state (used when a cycle simulates changes).
func (c *CycleState) Clone() *CycleState {
	out := NewCycleState()
	if p := c.entries.Load(); p != nil {
		next := make([]stateEntry, len(*p))
		for i, e := range *p {
			next[i] = stateEntry{key: e.key, data: e.data.Clone()}
		}
		out.entries.Store(&next)
	}
	for k, v := range c.SkipFilterPlugins {
		out.SkipFilterPlugins[k] = v
	}
	for k, v := range c.SkipScorePlugins {
		out.SkipScorePlugins[k] = v
	}
	return out
}
