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
// reads from parallel Filter calls (a sync.Map: no lock word bouncing between cores);
// writes happen in PreFilter/PreScore.
type CycleState struct {
	storage sync.Map // StateKey → StateData
	// SkipFilterPlugins and SkipScorePlugins record the plugins whose PreFilter/PreScore said Skip.
	SkipFilterPlugins map[string]bool
	SkipScorePlugins  map[string]bool
}

// NewCycleState returns an empty state.
func NewCycleState() *CycleState {
	return &CycleState{SkipFilterPlugins: map[string]bool{}, SkipScorePlugins: map[string]bool{}}
}

// Read returns the data at key.
func (c *CycleState) Read(key StateKey) (StateData, error) {
	if v, ok := c.storage.Load(key); ok {
		return v.(StateData), nil
	}
	return nil, ErrNotFound
}

// Write stores data at key.
func (c *CycleState) Write(key StateKey, data StateData) {
	c.storage.Store(key, data)
}

// Clone copies the state (used when a cycle simulates changes).
func (c *CycleState) Clone() *CycleState {
	out := NewCycleState()
	c.storage.Range(func(k, v any) bool {
		out.storage.Store(k, v.(StateData).Clone())
		return true
	})
	for k, v := range c.SkipFilterPlugins {
		out.SkipFilterPlugins[k] = v
	}
	for k, v := range c.SkipScorePlugins {
		out.SkipScorePlugins[k] = v
	}
	return out
}
