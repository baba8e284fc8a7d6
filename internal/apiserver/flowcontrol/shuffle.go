package flowcontrol

import "hash/fnv"

// flowHash is the shuffle-sharding entropy of a flow: its FlowSchema and distinguisher.
func flowHash(schema, distinguisher string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(schema))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(distinguisher))
	return h.Sum64()
}

// deal picks handSize distinct queues out of deck from the hash, calling pick with each
// in the order dealt (see dealHand).
func deal(hash uint64, deck, handSize int, pick func(queue int)) {
	var buf [16]int
	for _, q := range dealHand(hash, deck, handSize, &buf) {
		pick(q)
	}
}

// dealHand picks handSize (at most 16) distinct queues out of deck from the hash, in
// buf, returning them in the order dealt: the hash is read as a mixed-radix number
// (deck, deck-1, ...), each digit the index of a queue among those not yet dealt, so
// that each flow always gets the same hand and two flows rarely share all of theirs.
func dealHand(hash uint64, deck, handSize int, buf *[16]int) []int {
	var dealt [16]int // sorted
	handSize = min(handSize, len(dealt), deck)
	for i := 0; i < handSize; i++ {
		n := uint64(deck - i)
		card := int(hash % n)
		hash /= n
		// The card-th queue not dealt yet: step over the dealt ones at or below it.
		k := 0
		for ; k < i && dealt[k] <= card; k++ {
			card++
		}
		copy(dealt[k+1:i+1], dealt[k:i])
		dealt[k] = card
		buf[i] = card
	}
	return buf[:max(handSize, 0)]
}
