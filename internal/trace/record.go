// Package trace records what the API server did — every request, the storage write it
// made and every watch event it delivered — in bounded rings per resource, follows an
// object through owner references and Events, and renders the result as a sequence
// diagram (Mermaid, a numbered text timeline, or a self-contained SVG).
package trace

import "time"

// Type says what a Record describes.
type Type string

const (
	// TypeRequest is one API request, with the storage write it made if any.
	TypeRequest Type = "request"
	// TypeDelivery is one watch event sent to one watcher.
	TypeDelivery Type = "delivery"
)

// Record is one thing the API server did. Strings are shared with the request that
// produced them, so recording copies no bytes.
type Record struct {
	// Seq orders records across every ring: it grows by one per record.
	Seq uint64 `json:"seq"`
	// Time is when the request started or the event was delivered.
	Time time.Time `json:"time"`
	Type Type      `json:"type"`

	// User is the authenticated user of the request (or of the watch that received the event).
	User string `json:"user,omitempty"`
	// UserAgent is the client's User-Agent header.
	UserAgent string `json:"userAgent,omitempty"`
	// FieldManager is the request's fieldManager parameter, when given.
	FieldManager string `json:"fieldManager,omitempty"`

	// Verb is the API verb: create, update, patch, delete, get, list, watch, ...
	Verb   string `json:"verb,omitempty"`
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`

	// Resource is the plural resource name with its group: pods, deployments.apps.
	Resource    string `json:"resource"`
	Kind        string `json:"kind,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	UID         string `json:"uid,omitempty"`

	// Code is the response's HTTP status code.
	Code int `json:"code,omitempty"`
	// Latency is how long the request took.
	Latency time.Duration `json:"latency,omitempty"`

	// Key and Revision are the storage write the request made (etcd key, new revision).
	Key      string `json:"key,omitempty"`
	Revision int64  `json:"revision,omitempty"`
	// WriteOp is create, update or delete: what the write did in storage.
	WriteOp string `json:"writeOp,omitempty"`

	// EventType is ADDED, MODIFIED or DELETED for a delivery.
	EventType string `json:"eventType,omitempty"`
}

// ObjectRef names one object in the records: its resource (plural with group, as in
// Record.Resource), namespace and name.
type ObjectRef struct {
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// String is resource/namespace/name (resource/name for cluster-scoped objects).
func (o ObjectRef) String() string {
	if o.Namespace == "" {
		return o.Resource + "/" + o.Name
	}
	return o.Resource + "/" + o.Namespace + "/" + o.Name
}

// Ref returns the object a record is about.
func (r *Record) Ref() ObjectRef {
	return ObjectRef{Resource: r.Resource, Namespace: r.Namespace, Name: r.Name}
}
