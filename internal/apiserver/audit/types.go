// Package audit writes the API server's audit log as upstream's: audit.k8s.io/v1 Event
// objects, one JSON object per line (or upstream's legacy one-line text), for the
// requests an audit.k8s.io/v1 Policy selects, at the stages RequestReceived,
// ResponseStarted (long-running requests), ResponseComplete and Panic. The filter sits
// after authentication and before impersonation and authorization, as upstream's;
// later filters and handlers add annotations through filters.AddAuditAnnotation. Events
// are written by one goroutine behind a buffer, so that requests do not wait on the disk.
package audit

import (
	"encoding/json"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// APIVersion and the kinds of this package's objects, as upstream's.
const (
	APIVersion = "audit.k8s.io/v1"
	KindEvent  = "Event"
	KindPolicy = "Policy"
)

// Level is how much of a request is logged.
type Level string

// The levels, least first.
const (
	// LevelNone logs nothing.
	LevelNone Level = "None"
	// LevelMetadata logs who, what, when and the outcome, without bodies.
	LevelMetadata Level = "Metadata"
	// LevelRequest adds the request body.
	LevelRequest Level = "Request"
	// LevelRequestResponse adds the response body.
	LevelRequestResponse Level = "RequestResponse"
)

func (l Level) rank() int {
	switch l {
	case LevelMetadata:
		return 1
	case LevelRequest:
		return 2
	case LevelRequestResponse:
		return 3
	}
	return 0
}

// AtLeast reports whether l logs at least as much as o.
func (l Level) AtLeast(o Level) bool { return l.rank() >= o.rank() }

func (l Level) valid() bool {
	return l == LevelNone || l == LevelMetadata || l == LevelRequest || l == LevelRequestResponse
}

// Stage is the point in a request's handling an event is written at.
type Stage string

// The stages.
const (
	// StageRequestReceived is as soon as the audit filter sees the request.
	StageRequestReceived Stage = "RequestReceived"
	// StageResponseStarted is when the response headers are sent, for long-running
	// requests only (watch, exec, attach, port-forward, proxy, logs).
	StageResponseStarted Stage = "ResponseStarted"
	// StageResponseComplete is when the response is done.
	StageResponseComplete Stage = "ResponseComplete"
	// StagePanic is when the handler panicked.
	StagePanic Stage = "Panic"
)

func (s Stage) valid() bool {
	return s == StageRequestReceived || s == StageResponseStarted || s == StageResponseComplete || s == StagePanic
}

// Event is one audit record, with the JSON shape of upstream's audit.k8s.io/v1 Event.
type Event struct {
	metav1.TypeMeta `json:",inline"`
	// Level is the level the policy chose for the request.
	Level Level `json:"level"`
	// AuditID is the request's unique ID (also its Audit-Id response header).
	AuditID types.UID `json:"auditID"`
	// Stage is the stage this event was written at.
	Stage Stage `json:"stage"`
	// RequestURI is the request's path and query.
	RequestURI string `json:"requestURI"`
	// Verb is the request's verb (get, list, watch, create, ...; the lower-case HTTP method
	// for non-resource requests).
	Verb string `json:"verb"`
	// User is the authenticated user.
	User authnv1.UserInfo `json:"user"`
	// ImpersonatedUser is the user the request impersonates.
	ImpersonatedUser *authnv1.UserInfo `json:"impersonatedUser,omitempty"`
	// SourceIPs are the client's address and those of X-Forwarded-For and X-Real-Ip.
	SourceIPs []string `json:"sourceIPs,omitempty"`
	// UserAgent is the request's User-Agent header.
	UserAgent string `json:"userAgent,omitempty"`
	// ObjectRef names the object of a resource request.
	ObjectRef *ObjectReference `json:"objectRef,omitempty"`
	// ResponseStatus is the response's code, and for a Status response its other fields.
	ResponseStatus *metav1.Status `json:"responseStatus,omitempty"`
	// RequestObject is the request body as JSON, at level Request and above.
	RequestObject json.RawMessage `json:"requestObject,omitempty"`
	// ResponseObject is the response body as JSON, at level RequestResponse.
	ResponseObject json.RawMessage `json:"responseObject,omitempty"`
	// RequestReceivedTimestamp is when the audit filter saw the request.
	RequestReceivedTimestamp metav1.MicroTime `json:"requestReceivedTimestamp"`
	// StageTimestamp is when the stage was reached.
	StageTimestamp metav1.MicroTime `json:"stageTimestamp"`
	// Annotations are what filters and handlers recorded (the authorization decision and
	// reason, admission plugins' findings).
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ObjectReference names the object of a request, as upstream's.
type ObjectReference struct {
	Resource        string    `json:"resource,omitempty"`
	Namespace       string    `json:"namespace,omitempty"`
	Name            string    `json:"name,omitempty"`
	UID             types.UID `json:"uid,omitempty"`
	APIGroup        string    `json:"apiGroup,omitempty"`
	APIVersion      string    `json:"apiVersion,omitempty"`
	ResourceVersion string    `json:"resourceVersion,omitempty"`
	Subresource     string    `json:"subresource,omitempty"`
}
