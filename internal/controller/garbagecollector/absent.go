package garbagecollector

import "k8s.io/utils/lru"

// absentCache remembers owners that the API server said do not exist. UIDs are never
// reused, so an entry stays true forever; the cache is bounded only to bound memory.
type absentCache struct {
	c *lru.Cache
}

func newAbsentCache(size int) *absentCache {
	return &absentCache{c: lru.New(size)}
}

func (a *absentCache) add(r objectReference) { a.c.Add(r, struct{}{}) }

func (a *absentCache) has(r objectReference) bool {
	_, ok := a.c.Get(r)
	return ok
}
