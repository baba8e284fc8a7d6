package framework

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

type intState struct{ v int }

func (s *intState) Clone() StateData { return &intState{v: s.v} }

func TestCycleStateReadWrite(t *testing.T) {
	c := NewCycleState()
	if _, err := c.Read("a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read of an empty state: %v, want ErrNotFound", err)
	}
	c.Write("a", &intState{1})
	c.Write("b", &intState{2})
	c.Write("a", &intState{3}) // replaces
	for key, want := range map[StateKey]int{"a": 3, "b": 2} {
		got, err := c.Read(key)
		if err != nil || got.(*intState).v != want {
			t.Fatalf("Read(%q) = %v, %v; want %d", key, got, err, want)
		}
	}
	if _, err := c.Read("c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read of a missing key: %v, want ErrNotFound", err)
	}

	c.SkipFilterPlugins["p"] = true
	clone := c.Clone()
	clone.Write("a", &intState{4})
	got, _ := c.Read("a")
	if got.(*intState).v != 3 {
		t.Fatalf("writing the clone changed the original: %d", got.(*intState).v)
	}
	got, _ = clone.Read("b")
	if got.(*intState).v != 2 || !clone.SkipFilterPlugins["p"] {
		t.Fatalf("clone lost data: b=%d skip=%v", got.(*intState).v, clone.SkipFilterPlugins)
	}
	orig, _ := c.Read("b")
	if orig == got {
		t.Fatal("clone shares the data instead of cloning it")
	}
}

// TestCycleStateConcurrent reads while other goroutines write (run with -race).
func TestCycleStateConcurrent(t *testing.T) {
	c := NewCycleState()
	c.Write("fixed", &intState{7})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				c.Write(StateKey(fmt.Sprintf("w%d-%d", w, i%10)), &intState{i})
			}
		})
		wg.Go(func() {
			for range 1000 {
				if d, err := c.Read("fixed"); err != nil || d.(*intState).v != 7 {
					t.Errorf("Read(fixed) = %v, %v", d, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for w := range 4 {
		for i := range 10 {
			if _, err := c.Read(StateKey(fmt.Sprintf("w%d-%d", w, i))); err != nil {
				t.Fatalf("key w%d-%d lost: %v", w, i, err)
			}
		}
	}
}
