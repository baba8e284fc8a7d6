package apiserver

// stackReserve is how much stack a request's goroutine is given up front (growStack).
// Serving a write goes 20–30 KB deep (decode, validation, managedFields, protobuf
// sizing); net/http starts each request's goroutine with a small stack, which the
// runtime then doubles and copies two or three times, each time with every frame of
// the deep call chain to walk and adjust: about 5 % of the API server's CPU in the
// scheduler's bind phase.
const stackReserve = 16 << 10

// growStack grows the calling goroutine's stack to hold stackReserve more bytes while
// the call chain is still short, so that the copy has few frames to adjust and later
// calls find the room they need. (CockroachDB's growstack does the same for its
// request goroutines.) It returns a byte of its frame so that the frame is kept.
//
//go:noinline
func growStack(i int) byte {
	var buf [stackReserve]byte
	buf[i%len(buf)] = byte(i)
	return buf[(i+1)%len(buf)]
}
