package queue

import (
	"container/heap"
)

// podHeap is a heap of queued pods with lookup by key (namespace/name).
type podHeap struct {
	data heapData
}

func newPodHeap(less func(a, b *QueuedPodInfo) bool) *podHeap {
	return &podHeap{data: heapData{less: less, byKey: map[string]*QueuedPodInfo{}}}
}

// heapData implements heap.Interface; each item records its index.
type heapData struct {
	less  func(a, b *QueuedPodInfo) bool
	items []*QueuedPodInfo
	byKey map[string]*QueuedPodInfo
}

func (h *heapData) Len() int           { return len(h.items) }
func (h *heapData) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *heapData) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index, h.items[j].index = i, j
}
func (h *heapData) Push(x any) {
	p := x.(*QueuedPodInfo)
	p.index = len(h.items)
	h.items = append(h.items, p)
}
func (h *heapData) Pop() any {
	n := len(h.items) - 1
	p := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	p.index = -1
	return p
}

// addOrUpdate inserts p, replacing an item with the same key.
func (h *podHeap) addOrUpdate(p *QueuedPodInfo) {
	key := p.key()
	if old, ok := h.data.byKey[key]; ok {
		if old == p {
			heap.Fix(&h.data, p.index)
			return
		}
		heap.Remove(&h.data, old.index)
	}
	h.data.byKey[key] = p
	heap.Push(&h.data, p)
}

// fix restores the order after p changed.
func (h *podHeap) fix(p *QueuedPodInfo) { heap.Fix(&h.data, p.index) }

func (h *podHeap) get(key string) (*QueuedPodInfo, bool) {
	p, ok := h.data.byKey[key]
	return p, ok
}

func (h *podHeap) delete(key string) bool {
	p, ok := h.data.byKey[key]
	if !ok {
		return false
	}
	heap.Remove(&h.data, p.index)
	delete(h.data.byKey, key)
	return true
}

func (h *podHeap) peek() *QueuedPodInfo {
	if len(h.data.items) == 0 {
		return nil
	}
	return h.data.items[0]
}

func (h *podHeap) pop() *QueuedPodInfo {
	if len(h.data.items) == 0 {
		return nil
	}
	p := heap.Pop(&h.data).(*QueuedPodInfo)
	delete(h.data.byKey, p.key())
	return p
}

func (h *podHeap) len() int { return len(h.data.items) }

func (h *podHeap) list() []*QueuedPodInfo {
	return append([]*QueuedPodInfo(nil), h.data.items...)
}
