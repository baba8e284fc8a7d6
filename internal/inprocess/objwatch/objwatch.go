// Package objwatch serves the watches of `kubette up`'s in-process components as
// objects: the API server's watch handler hands each event's object to the watching
// client, which copies it, instead of encoding it into protobuf frames that the client
// decodes again. The request still goes through the whole handler chain
// (authentication, authorization, selectors, resource versions, bookmarks, 410s, the
// trace's delivery records); only the last step, the bytes on the stream, is skipped.
//
// The client side (Watch, ListWatch) puts a Sink in the request's context; only an
// in-process request can carry one (see package inprocess), so a request from the
// network is never served this way. The server side asks FromContext for the sink and,
// when there is one, calls Send for each event and End when the watch ends.
package objwatch

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// ContentType is the Content-Type of a watch response whose events go through the
// request's Sink; the response has no body.
const ContentType = "application/vnd.kubette.objwatch"

// sinkBuffer is how many events the handler may send ahead of the client, as the
// in-process transport's 4 MB of buffered frames let it before: a burst of events
// never makes the watch cache drop a watcher whose client is a little behind.
const sinkBuffer = 1024

// CopyFunc returns the watching client's own copy of an object the API server
// shares with its other watchers (client-go's stores hand out the objects they keep,
// and their callers must not mutate them, so every informer needs its own copy).
type CopyFunc func(runtime.Object) runtime.Object

// DeepCopy is the default CopyFunc.
func DeepCopy(obj runtime.Object) runtime.Object { return obj.DeepCopyObject() }

// Sink carries one watch's events from the API server's handler to the client.
type Sink struct {
	copyObj CopyFunc
	events  chan watch.Event
	endOnce sync.Once
}

// NewSink returns a sink whose objects are copied with copyObj (DeepCopy when nil).
func NewSink(copyObj CopyFunc) *Sink {
	if copyObj == nil {
		copyObj = DeepCopy
	}
	return &Sink{copyObj: copyObj, events: make(chan watch.Event, sinkBuffer)}
}

type sinkKey struct{}

// NewContext returns ctx carrying sink.
func NewContext(ctx context.Context, sink *Sink) context.Context {
	return context.WithValue(ctx, sinkKey{}, sink)
}

// FromContext returns the sink of an in-process watch request, if it carries one.
func FromContext(ctx context.Context) (*Sink, bool) {
	s, ok := ctx.Value(sinkKey{}).(*Sink)
	return s, ok && s != nil
}

// Send hands an event to the client; shared says that obj may share memory with the
// server's own objects (the watch cache's, shared with other watchers, or a
// conversion of one), and the sink copies it first; an object made for this watcher
// alone (a bookmark, an error's Status) is handed over as it is. It returns false once ctx is done: the client
// stopped the watch. The object handed over has no apiVersion and kind, as client-go's
// typed watch decoder leaves them (runtime.WithoutVersionDecoder). Only the handler
// serving the watch calls Send and End.
func (s *Sink) Send(ctx context.Context, typ watch.EventType, obj runtime.Object, shared bool) bool {
	if shared {
		obj = s.copyObj(obj)
	}
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	select {
	case s.events <- watch.Event{Type: typ, Object: obj}:
		return true
	case <-ctx.Done():
		return false
	}
}

// SendStatus sends an ERROR event with st, as a watch stream ends with one.
func (s *Sink) SendStatus(ctx context.Context, st *metav1.Status) bool {
	return s.Send(ctx, watch.Error, st, false)
}

// End closes the event channel: the watch ended. Safe to call more than once.
func (s *Sink) End() {
	s.endOnce.Do(func() { close(s.events) })
}
