package framework

import (
	"errors"
	"sync"
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

// CycleState holds plugin data for one pod's scheduling cycle. It is safe for concurrent
// reads from parallel Filter calls; writes happen in PreFilter/PreScore.
type CycleState struct {
	mu      sync.RWMutex
	storage map[StateKey]StateData
	// SkipFilterPlugins and SkipScorePlugins record the plugins whose PreFilter/PreScore said Skip.
	SkipFilterPlugins map[string]bool
	SkipScorePlugins  map[string]bool
}

// NewCycleState returns an empty state.
func NewCycleState() *CycleState {
	return &CycleState{storage: map[StateKey]StateData{}, SkipFilterPlugins: map[string]bool{}, SkipScorePlugins: map[string]bool{}}
}

// Read returns the data at key.
func (c *CycleState) Read(key StateKey) (StateData, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if v, ok := c.storage[key]; ok {
		return v, nil
	}
	return nil, ErrNotFound
}

// Write stores data at key.
func (c *CycleState) Write(key StateKey, data StateData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.storage[key] = data
}

// Clone copies the state (used when a cycle simulates changes).
func (c *CycleState) Clone() *CycleState {
	out := NewCycleState()
	c.mu.RLock()
	defer c.mu.RUnlock()
	for k, v := range c.storage {
		out.storage[k] = v.Clone()
	}
	for k, v := range c.SkipFilterPlugins {
		out.SkipFilterPlugins[k] = v
	}
	for k, v := range c.SkipScorePlugins {
		out.SkipScorePlugins[k] = v
	}
	return out
}
