package affinitymatch

import (
	"runtime"
	"sync"
	"weak"

	corev1 "k8s.io/api/core/v1"
)

// TermCache remembers the parsed affinity terms of pods, so that the pods
// already on nodes are parsed once rather than in every scheduling cycle
// (upstream keeps the parsed terms in its PodInfo; kubette's framework.PodInfo
// holds only the pod).
//
// Entries are keyed by the pod object's address through a weak pointer and
// disappear when the object is garbage collected, so the cache never outlives
// the snapshot's pods. This relies on the snapshot's rule that a pod object is
// never modified: a changed pod is a new object and gets a new entry. It is
// safe for concurrent use.
type TermCache struct {
	entries sync.Map // weak.Pointer[corev1.Pod] -> *PodTerms
}

// NewTermCache returns an empty cache.
func NewTermCache() *TermCache {
	return &TermCache{}
}

// Get returns pod's parsed terms. Groups that fail to parse are empty, as
// with ParsePodTerms; callers that must reject invalid pods parse themselves.
func (c *TermCache) Get(pod *corev1.Pod) *PodTerms {
	key := weak.Make(pod)
	if v, ok := c.entries.Load(key); ok {
		return v.(*PodTerms)
	}
	terms, _ := ParsePodTerms(pod)
	if v, loaded := c.entries.LoadOrStore(key, terms); loaded {
		return v.(*PodTerms)
	}
	runtime.AddCleanup(pod, c.forget, key)
	return terms
}

// forget drops the entry of a collected pod.
func (c *TermCache) forget(key weak.Pointer[corev1.Pod]) {
	c.entries.Delete(key)
}

// Len returns the number of cached pods (for tests and metrics).
func (c *TermCache) Len() int {
	n := 0
	c.entries.Range(func(any, any) bool {
		n++
		return true
	})
	return n
}
