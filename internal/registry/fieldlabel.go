package registry

// eventsV1FieldLabels maps the field selector labels of events.k8s.io/v1 Events onto the
// selectable fields of the stored core/v1 Event (eventFields), as upstream's field label
// conversion of that API version; no other label is supported there.
func eventsV1FieldLabels() map[string]string {
	return map[string]string{
		"reason":                    "reason",
		"regarding.kind":            "involvedObject.kind",
		"regarding.namespace":       "involvedObject.namespace",
		"regarding.name":            "involvedObject.name",
		"regarding.uid":             "involvedObject.uid",
		"regarding.apiVersion":      "involvedObject.apiVersion",
		"regarding.resourceVersion": "involvedObject.resourceVersion",
		"regarding.fieldPath":       "involvedObject.fieldPath",
		"reportingController":       "reportingComponent",
		"type":                      "type",
		"metadata.namespace":        "metadata.namespace",
		"metadata.name":             "metadata.name",
	}
}

// FieldLabel converts a field selector's label, as the resource's API version names it,
// to the label of the stored object's selectable fields (SelectableFields), and reports
// whether the resource supports it. Most resources name their fields as they store them;
// events.k8s.io/v1 Events have names of their own (regarding.name for the stored
// involvedObject.name, reportingController for reportingComponent), as upstream.
func (r *Resource) FieldLabel(label string) (string, bool) {
	if r.GroupVersion == eventsV1 && r.Kind == "Event" {
		stored, ok := eventsV1FieldLabels()[label]
		return stored, ok
	}
	return label, r.SupportsField(label)
}
