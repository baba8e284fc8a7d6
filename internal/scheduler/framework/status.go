// Package framework is the scheduler's plugin framework: the extension points
// (PreFilter, Filter, PostFilter, PreScore, Score, Bind), the Status every plugin
// returns, the per-cycle state, and the NodeInfo snapshot plugins read. Plugins
// live one per package under internal/scheduler/plugins and depend only on this.
package framework

import (
	"errors"
	"strings"
)

// Code is the outcome of a plugin call.
type Code int

const (
	// Success means the plugin passed (a nil *Status is also success).
	Success Code = iota
	// Error is an internal error: the pod is retried with backoff.
	Error
	// Unschedulable means the pod does not fit this node now; preemption or a cluster change may help.
	Unschedulable
	// UnschedulableAndUnresolvable means the pod can never fit this node as it is (e.g. a node selector).
	UnschedulableAndUnresolvable
	// Skip from PreFilter/PreScore means the plugin's Filter/Score need not run for this pod.
	Skip
	// Wait from a Permit plugin holds the pod's binding until the plugin allows
	// or rejects it, or its timeout passes.
	Wait
)

var codeNames = [...]string{"Success", "Error", "Unschedulable", "UnschedulableAndUnresolvable", "Skip", "Wait"}

// String returns the code's name.
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "Unknown"
}

// Status is the result of a plugin call. A nil *Status means Success.
type Status struct {
	code    Code
	reasons []string
	err     error
	plugin  string
}

// NewStatus returns a status with a code and human-readable reasons.
func NewStatus(code Code, reasons ...string) *Status {
	s := &Status{code: code, reasons: reasons}
	if code == Error && len(reasons) > 0 {
		s.err = errors.New(strings.Join(reasons, ", "))
	}
	return s
}

// AsStatus wraps an error as an Error status (nil for a nil error).
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return &Status{code: Error, reasons: []string{err.Error()}, err: err}
}

// Code returns the status code (Success for nil).
func (s *Status) Code() Code {
	if s == nil {
		return Success
	}
	return s.code
}

// IsSuccess reports whether the status is nil or Success.
func (s *Status) IsSuccess() bool { return s.Code() == Success }

// IsSkip reports whether the status is Skip.
func (s *Status) IsSkip() bool { return s.Code() == Skip }

// IsWait reports whether the status is Wait.
func (s *Status) IsWait() bool { return s.Code() == Wait }

// IsRejected reports whether the pod was found not to fit (Unschedulable or UnschedulableAndUnresolvable).
func (s *Status) IsRejected() bool {
	c := s.Code()
	return c == Unschedulable || c == UnschedulableAndUnresolvable
}

// Reasons returns the reasons, exactly as they appear in the FailedScheduling message.
func (s *Status) Reasons() []string {
	if s == nil {
		return nil
	}
	return s.reasons
}

// Message joins the reasons with ", ".
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.reasons, ", ")
}

// Plugin returns the name of the plugin that produced the status.
func (s *Status) Plugin() string {
	if s == nil {
		return ""
	}
	return s.plugin
}

// WithPlugin records the plugin that produced the status and returns it.
func (s *Status) WithPlugin(name string) *Status {
	if s != nil {
		s.plugin = name
	}
	return s
}

// AsError returns the status as an error (nil for Success, Skip and Wait).
func (s *Status) AsError() error {
	if s.IsSuccess() || s.IsSkip() || s.IsWait() {
		return nil
	}
	if s.err != nil {
		return s.err
	}
	return errors.New(s.Message())
}
