package printers

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// eventPrinter prints events (core v1 and events.k8s.io/v1): LAST SEEN TYPE
// REASON OBJECT MESSAGE | SUBOBJECT SOURCE FIRST SEEN COUNT NAME. The cells
// follow the column order, so the wide-only columns are interleaved.
func eventPrinter() Printer {
	doc := corev1.Event{}.SwaggerDoc()
	nameCol := nameColumn()
	nameCol.Priority = 1
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			column("Last Seen", "string", 0, doc["lastTimestamp"]),
			column("Type", "string", 0, doc["type"]),
			column("Reason", "string", 0, doc["reason"]),
			column("Object", "string", 0, doc["involvedObject"]),
			column("Subobject", "string", 1, corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]),
			column("Source", "string", 1, doc["source"]),
			column("Message", "string", 0, doc["message"]),
			column("First Seen", "string", 1, doc["firstTimestamp"]),
			column("Count", "string", 1, doc["count"]),
			nameCol,
		},
		Row: func(obj runtime.Object, now time.Time) ([]interface{}, error) {
			ev, err := asCoreEvent(obj)
			if err != nil {
				return nil, err
			}
			return eventCells(ev, now), nil
		},
	}
}

// eventCells returns the cells of one core event.
func eventCells(ev *corev1.Event, now time.Time) []interface{} {
	first := translateTimestampSince(ev.FirstTimestamp, now)
	if ev.FirstTimestamp.IsZero() {
		first = translateMicroTimestampSince(ev.EventTime, now)
	}
	last := translateTimestampSince(ev.LastTimestamp, now)
	if ev.LastTimestamp.IsZero() {
		last = first
	}
	count := ev.Count
	if ev.Series != nil {
		last = translateMicroTimestampSince(ev.Series.LastObservedTime, now)
		count = ev.Series.Count
	} else if count == 0 {
		// Singleton events of the new API carry no count.
		count = 1
	}

	target := strings.ToLower(ev.InvolvedObject.Kind)
	if ev.InvolvedObject.Name != "" {
		target += "/" + ev.InvolvedObject.Name
	}

	return []interface{}{
		last,
		ev.Type,
		ev.Reason,
		target,
		ev.InvolvedObject.FieldPath,
		eventSource(ev),
		strings.TrimSpace(ev.Message),
		first,
		int64(count),
		ev.Name,
	}
}

// eventSource renders "component, host", falling back to the reporting
// controller and instance, and omitting an empty host.
func eventSource(ev *corev1.Event) string {
	component := ev.Source.Component
	if component == "" {
		component = ev.ReportingController
	}
	host := ev.Source.Host
	if host == "" {
		host = ev.ReportingInstance
	}
	if host == "" {
		return component
	}
	return component + ", " + host
}

// asCoreEvent returns obj as a core v1 event, converting events.k8s.io/v1
// events (typed or unstructured) the way kube-apiserver does.
func asCoreEvent(obj runtime.Object) (*corev1.Event, error) {
	switch o := obj.(type) {
	case *eventsv1.Event:
		if o == nil {
			return &corev1.Event{}, nil
		}
		return coreEventFromEventsV1(o), nil
	case runtime.Unstructured:
		if o.GetObjectKind().GroupVersionKind().Group == eventsv1.GroupName {
			ev, err := asType[eventsv1.Event](obj)
			if err != nil {
				return nil, err
			}
			return coreEventFromEventsV1(ev), nil
		}
	case *corev1.Event:
	default:
		return nil, fmt.Errorf("printers: expected *v1.Event or *events/v1.Event, got %T", obj)
	}
	return asType[corev1.Event](obj)
}

// coreEventFromEventsV1 maps an events.k8s.io/v1 event onto the core v1
// fields the printer reads.
func coreEventFromEventsV1(e *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		ObjectMeta:          e.ObjectMeta,
		InvolvedObject:      e.Regarding,
		Reason:              e.Reason,
		Message:             e.Note,
		Source:              e.DeprecatedSource,
		FirstTimestamp:      e.DeprecatedFirstTimestamp,
		LastTimestamp:       e.DeprecatedLastTimestamp,
		Count:               e.DeprecatedCount,
		Type:                e.Type,
		EventTime:           e.EventTime,
		Related:             e.Related,
		Action:              e.Action,
		ReportingController: e.ReportingController,
		ReportingInstance:   e.ReportingInstance,
	}
	if e.Series != nil {
		out.Series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	return out
}
