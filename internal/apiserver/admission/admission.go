// Package admission is the chain of admission plugins around the API server's generic
// write path, as upstream's: mutating plugins may change the object before it is
// validated, validating plugins may only refuse it. Plugins (LimitRanger, ServiceAccount,
// ResourceQuota, PodSecurity, Priority, NodeRestriction, ...) live in packages of their
// own and see every create, update and delete of every kind; each picks what it handles.
package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/filters"
)

// Operation is what a request does to an object.
type Operation string

// The operations, as upstream's admission.Operation.
const (
	Create  Operation = "CREATE"
	Update  Operation = "UPDATE"
	Delete  Operation = "DELETE"
	Connect Operation = "CONNECT"
)

// Attributes describe one write to admit.
type Attributes struct {
	// Resource and Kind of the object as served (the request's group and version).
	Resource schema.GroupVersionResource
	Kind     schema.GroupVersionKind
	// Subresource is "" for the object itself, else status, scale, ephemeralcontainers, ...
	Subresource string
	Namespace   string
	Name        string
	Operation   Operation
	// Object is the object to be written (nil for a delete); mutating plugins may change
	// it in place. OldObject is the stored object (nil for a create). Both are the typed
	// k8s.io/api objects of built-in kinds, unstructured ones for custom resources.
	Object    runtime.Object
	OldObject runtime.Object
	// User is who asks.
	User   *filters.User
	DryRun bool
}

// Mutator is a plugin that may change the object (defaults, injected volumes). It is
// called before the kind's validation.
type Mutator interface {
	// Admit changes a.Object as the plugin requires, or refuses the request.
	Admit(ctx context.Context, a *Attributes) error
}

// Validator is a plugin that may refuse a write, after the kind's validation.
type Validator interface {
	// Validate refuses the request with an API status error, or returns nil.
	Validate(ctx context.Context, a *Attributes) error
}

// ConnectHandler is implemented by the plugins that see connect requests (exec,
// attach, port-forward: Operation Connect, the options as Object); the others, as
// upstream's that do not handle CONNECT, are not called for them.
type ConnectHandler interface {
	// HandlesConnect reports whether the plugin sees connect requests.
	HandlesConnect() bool
}

// handles reports whether plugin impl sees an operation.
func handles(impl any, op Operation) bool {
	if op != Connect {
		return true
	}
	c, ok := impl.(ConnectHandler)
	return ok && c.HandlesConnect()
}

// Plugin is a named admission plugin; it implements Mutator, Validator or both.
type Plugin struct {
	Name string
	// Impl implements Mutator and/or Validator.
	Impl any
}

// Chain runs plugins in order: every Mutator in Admit, every Validator in Validate.
// The zero Chain admits everything.
type Chain []Plugin

// Admit runs the mutating plugins in order; the first refusal ends it.
func (c Chain) Admit(ctx context.Context, a *Attributes) error {
	for _, p := range c {
		if m, ok := p.Impl.(Mutator); ok && handles(p.Impl, a.Operation) {
			if err := m.Admit(ctx, a); err != nil {
				return wrap(p.Name, err)
			}
		}
	}
	return nil
}

// Validate runs the validating plugins in order; the first refusal ends it.
func (c Chain) Validate(ctx context.Context, a *Attributes) error {
	for _, p := range c {
		if v, ok := p.Impl.(Validator); ok && handles(p.Impl, a.Operation) {
			if err := v.Validate(ctx, a); err != nil {
				return wrap(p.Name, err)
			}
		}
	}
	return nil
}

// wrap keeps API status errors as they are (their code and message are the plugin's
// answer) and turns any other error into a 500 naming the plugin.
func wrap(plugin string, err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return err
	}
	return apierrors.NewInternalError(fmt.Errorf("admission plugin %q failed: %w", plugin, err))
}

// Warnings collects the warnings admission plugins give a request; the API server
// sends them as Warning headers, as upstream's warning.AddWarning.
type Warnings struct {
	mu   sync.Mutex
	list []string
}

type warningsKey struct{}

// WithWarnings returns a context whose plugins' warnings go to the returned collector.
func WithWarnings(ctx context.Context) (context.Context, *Warnings) {
	w := &Warnings{}
	return context.WithValue(ctx, warningsKey{}, w), w
}

// AddWarning records a warning for the request of ctx (nothing when it collects none).
func AddWarning(ctx context.Context, msg string) {
	if w, ok := ctx.Value(warningsKey{}).(*Warnings); ok && msg != "" {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, m := range w.list {
			if m == msg {
				return
			}
		}
		w.list = append(w.list, msg)
	}
}

// List returns the warnings recorded so far.
func (w *Warnings) List() []string {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.list...)
}
