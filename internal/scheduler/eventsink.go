package scheduler

import (
	"context"
	"errors"

	eventsv1 "k8s.io/api/events/v1"
	typedeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
)

// eventSink is client-go's events.EventSinkImpl with a cheaper Create: the typed
// client's Create encodes its empty CreateOptions into query parameters by reflection
// on every call — 3.5 % of `up`'s CPU while binding at 5000 nodes, where each bound
// pod gets a Scheduled Event — so Create posts the Event with the REST client itself.
// Update and Patch stay the typed client's.
type eventSink struct {
	events.EventSinkImpl
}

func newEventSink(c typedeventsv1.EventsV1Interface) *eventSink {
	return &eventSink{EventSinkImpl: events.EventSinkImpl{Interface: c}}
}

// Create posts the Event to its namespace.
func (s *eventSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	if e.Namespace == "" {
		return nil, errors.New("can't create an event with empty namespace")
	}
	out := &eventsv1.Event{}
	if err := s.Interface.RESTClient().Post().Namespace(e.Namespace).Resource("events").Body(e).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}
