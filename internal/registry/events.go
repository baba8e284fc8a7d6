package registry

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// eventToServed is the events.k8s.io/v1 resource's ToServed: stored core/v1 Events
// become events.k8s.io/v1 ones.
func eventToServed(obj runtime.Object) (runtime.Object, error) {
	if e, ok := obj.(*corev1.Event); ok {
		return EventToV1(e), nil
	}
	return obj, nil
}

// eventToStorage is the events.k8s.io/v1 resource's ToStorage.
func eventToStorage(obj runtime.Object) (runtime.Object, error) {
	if e, ok := obj.(*eventsv1.Event); ok {
		return EventFromV1(e), nil
	}
	return obj, nil
}

// EventToV1 converts a stored core/v1 Event to its events.k8s.io/v1 form.
func EventToV1(in *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		ObjectMeta:               *in.ObjectMeta.DeepCopy(),
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	out.APIVersion, out.Kind = "events.k8s.io/v1", "Event"
	if in.Related != nil {
		r := *in.Related
		out.Related = &r
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out
}

// EventFromV1 converts an events.k8s.io/v1 Event to the stored core/v1 form.
func EventFromV1(in *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		ObjectMeta:          *in.ObjectMeta.DeepCopy(),
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Action:              in.Action,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
	}
	out.APIVersion, out.Kind = "v1", "Event"
	if in.Related != nil {
		r := *in.Related
		out.Related = &r
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out
}
