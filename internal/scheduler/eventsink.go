package scheduler

import (
	"context"
	"errors"
	"sync"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	typedeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"

	"github.com/kubette/kubette/internal/scheduler/poster"
)

// eventPosters is how many goroutines post the Events of an eventSink.
const eventPosters = 8

// eventSink is client-go's events.EventSinkImpl with a cheaper Create: the typed
// client's Create encodes its empty CreateOptions into query parameters by reflection
// on every call — 3.5 % of `up`'s CPU while binding at 5000 nodes, where each bound
// pod gets a Scheduled Event — so Create posts the Event with the REST client itself.
// It does so on one of a few poster goroutines that stay: client-go's broadcaster
// calls Create from a goroutine it starts per Event, whose stack grew by copying on
// every post (0.8 % of `up`'s CPU there). With a real REST client the posts go
// through a poster.Poster, without client-go's request builder. Update and Patch
// stay the typed client's.
//
// Create returns the Event it was given, not the server's copy of it: the only
// caller, client-go's broadcaster, discards the result (attemptRecording), and
// decoding each created Event's response was ~2 KB and a protobuf decode per bound
// pod. A failed post returns the server's error as before.
type eventSink struct {
	events.EventSinkImpl
	ctx     context.Context
	posts   chan eventPost
	posters sync.WaitGroup
	client  *poster.Poster // nil: the REST client posts
}

// eventPost is one Create handed to a poster, which sends the result on done.
type eventPost struct {
	ctx  context.Context
	e    *eventsv1.Event
	done chan eventPostResult
}

type eventPostResult struct {
	out *eventsv1.Event
	err error
}

// newEventSink returns a sink whose posters run until ctx is done; Create posts on
// its caller's goroutine after that.
func newEventSink(ctx context.Context, c typedeventsv1.EventsV1Interface) *eventSink {
	s := &eventSink{EventSinkImpl: events.EventSinkImpl{Interface: c}, ctx: ctx, posts: make(chan eventPost)}
	if rc, ok := c.RESTClient().(*rest.RESTClient); ok && rc != nil {
		s.client, _ = poster.New(rc) // nil without an HTTP client: the REST client posts
	}
	for range eventPosters {
		s.posters.Go(s.poster)
	}
	return s
}

// wait returns once the posters have left (after the sink's context is done).
func (s *eventSink) wait() { s.posters.Wait() }

// poster posts Events until the sink's context is done.
func (s *eventSink) poster() {
	for {
		select {
		case p := <-s.posts:
			out, err := s.post(p.ctx, p.e)
			p.done <- eventPostResult{out, err}
		case <-s.ctx.Done():
			return
		}
	}
}

// Create posts the Event to its namespace.
func (s *eventSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	if e.Namespace == "" {
		return nil, errors.New("can't create an event with empty namespace")
	}
	p := eventPost{ctx: ctx, e: e, done: make(chan eventPostResult, 1)}
	select {
	case s.posts <- p:
		r := <-p.done
		return r.out, r.err
	case <-s.ctx.Done():
		return s.post(ctx, e)
	}
}

func (s *eventSink) post(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	if s.client != nil {
		if err := s.client.Post(ctx, poster.Path(e.Namespace, "events", "", ""), e, nil, eventsGR, e.Name); err != nil {
			return nil, err
		}
		return e, nil
	}
	if err := s.Interface.RESTClient().Post().Namespace(e.Namespace).Resource("events").Body(e).Do(ctx).Error(); err != nil {
		return nil, err
	}
	return e, nil
}

// eventsGR names Events in errors built from responses without a Status.
var eventsGR = schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
