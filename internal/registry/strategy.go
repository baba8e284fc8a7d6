package registry

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Strategy is everything a kind does differently on the generic write path, as upstream's
// REST strategies (pkg/registry/<group>/<kind>/strategy.go). The API server's handlers call
// only these hooks (through the Resource methods below, which supply the generic behaviour
// for a nil hook), so a new kind is a table entry and its strategy, and a custom resource
// is a strategy built from its definition.
type Strategy struct {
	// PrepareForCreate resets what a client may not set when creating obj and fills what
	// the server sets. Nil clears the status (as every upstream strategy of a kind with a
	// status); kinds whose creator also writes the status (Nodes, Namespaces) keep it.
	PrepareForCreate func(obj runtime.Object)
	// PrepareForCreateContext then fills what the server takes from the request, such as
	// the requesting user (a CertificateSigningRequest's requester); nil fills nothing.
	PrepareForCreateContext func(ctx context.Context, obj runtime.Object)
	// PrepareForUpdate carries over from old what an update of the main resource may
	// leave out or may not change, beyond the status (which the generic path keeps for
	// kinds with a status subresource): for example a Service's allocated addresses.
	PrepareForUpdate func(obj, old runtime.Object)
	// GenerationChanged reports whether an update of old to obj moves
	// metadata.generation; nil means the spec changed (kinds with a spec).
	GenerationChanged func(obj, old runtime.Object) bool
	// Normalize is what decoding an object does beyond the wire format, from a request
	// (request true) or from storage: a custom resource's schema prunes unknown
	// fields and coerces metadata. It returns the unknown fields of a request, which
	// fieldValidation turns into warnings or an error. Nil does nothing.
	Normalize func(obj runtime.Object, request bool) (unknownFields []string, err error)
	// Default applies the kind's defaults (also on server-side apply).
	Default func(obj runtime.Object)
	// Validate, ValidateUpdate and ValidateStatusUpdate return the field errors of a
	// defaulted new object, of an update of old to obj, and of an update through the
	// status subresource.
	Validate             func(obj runtime.Object) field.ErrorList
	ValidateUpdate       func(obj, old runtime.Object) field.ErrorList
	ValidateStatusUpdate func(obj, old runtime.Object) field.ErrorList
	// Subresources holds the update rules of subresources other than status that write
	// the whole object (a Namespace's finalize, a Pod's ephemeralcontainers).
	Subresources map[string]SubresourceStrategy
	// Scale maps the scale subresource onto the kind; nil when it has none.
	Scale *ScaleStrategy
	// DefaultGarbageCollectionPolicy is the propagation of a deletion whose options name
	// none, as upstream's DefaultGarbageCollectionPolicy; empty means Background. Core/v1
	// ReplicationControllers orphan their pods by default.
	DefaultGarbageCollectionPolicy metav1.DeletionPropagation
	// CheckDelete refuses the deletion of obj (a Namespace that may never be deleted).
	CheckDelete func(obj runtime.Object) error
	// GracePeriod returns how long a deletion of obj waits before the object goes, as
	// upstream's CheckGracefulDelete; nil means at once. A kind with a grace period may
	// have a pending deletion shortened by a later request.
	GracePeriod func(obj runtime.Object, opts *metav1.DeleteOptions) int64
	// PrepareForDelete changes obj as its deletion marks it and reports whether the
	// deletion must wait for kind-specific finalization (a Namespace with spec.finalizers
	// becomes Terminating).
	PrepareForDelete func(obj runtime.Object) (pending bool)
	// Finalizing reports whether obj, marked for deletion, still waits for kind-specific
	// finalization before it may be removed (a Namespace's spec.finalizers).
	Finalizing func(obj runtime.Object) bool
	// Allocator reserves and frees values that objects of the kind hold exclusively
	// (a Service's cluster IPs and node ports). It needs the server's storage, so the
	// API server that serves the table sets it; nil allocates nothing.
	Allocator Allocator
}

// SubresourceStrategy is how an update through one subresource changes an object.
type SubresourceStrategy struct {
	// PrepareForUpdate returns the object to write from the current state old and the
	// request's object obj, keeping everything the subresource may not change.
	PrepareForUpdate func(obj, old runtime.Object) runtime.Object
	// ValidateUpdate validates the result against old.
	ValidateUpdate func(obj, old runtime.Object) field.ErrorList
	// Verbs are the verbs served on the subresource (of get, update and patch).
	Verbs []string
}

// Serves reports whether the subresource is served for verb.
func (s SubresourceStrategy) Serves(verb string) bool {
	for _, v := range s.Verbs {
		if v == verb {
			return true
		}
	}
	return false
}

// SubresourceServes reports whether verb is served on subresource sub of the kind:
// a subresource with its own update rules says so itself; status serves get, update
// and patch; other subresources (scale, binding, log, ...) have handlers of their own.
func (r *Resource) SubresourceServes(sub, verb string) bool {
	if s, ok := r.Strategy.Subresources[sub]; ok {
		return s.Serves(verb)
	}
	return sub == "status" && (verb == "get" || verb == "update" || verb == "patch")
}

// ScaleStrategy maps the scale subresource (autoscaling/v1 Scale) onto a kind.
type ScaleStrategy struct {
	// Replicas returns the desired and observed replicas and the label selector of the
	// pods, in the string form a Scale's status carries.
	Replicas func(obj runtime.Object) (spec, status int32, selector string, err error)
	// SetReplicas sets the desired replicas.
	SetReplicas func(obj runtime.Object, n int32)
}

// Allocator reserves values an object holds exclusively. Allocate is called before a
// create (old nil) or an update is validated and may change obj (fill allocated values);
// the returned function must be called with whether the write succeeded, and releases
// what the outcome left unused. Release frees what a deleted object held.
type Allocator interface {
	Allocate(ctx context.Context, obj, old runtime.Object, dryRun bool) (finish func(written bool), err error)
	Release(obj runtime.Object)
}

// PrepareForCreate applies the strategy's create preparation (by default, clearing the status).
func (r *Resource) PrepareForCreate(obj runtime.Object) {
	if r.Strategy.PrepareForCreate != nil {
		r.Strategy.PrepareForCreate(obj)
		return
	}
	ClearStatus(obj)
}

// PrepareForCreateIn applies the create preparation, then what the strategy fills from
// the request's context (its user).
func (r *Resource) PrepareForCreateIn(ctx context.Context, obj runtime.Object) {
	r.PrepareForCreate(obj)
	if r.Strategy.PrepareForCreateContext != nil {
		r.Strategy.PrepareForCreateContext(ctx, obj)
	}
}

// PrepareForUpdate keeps what an update of the main resource may not change: the status
// of a kind with a status subresource, then whatever the strategy keeps.
func (r *Resource) PrepareForUpdate(obj, old runtime.Object) {
	if r.HasSubresource("status") {
		CopyStatus(obj, old)
	}
	if r.Strategy.PrepareForUpdate != nil {
		r.Strategy.PrepareForUpdate(obj, old)
	}
}

// PrepareForStatusUpdate keeps what an update through the status subresource may not
// change: the spec, the labels and the owner references (the status and the other
// metadata, such as a Deployment's revision annotation, change).
func (r *Resource) PrepareForStatusUpdate(obj, old runtime.Object) {
	CopySpec(obj, old)
	nm, err1 := metaOf(obj)
	om, err2 := metaOf(old)
	if err1 == nil && err2 == nil {
		nm.SetLabels(om.GetLabels())
		nm.SetOwnerReferences(om.GetOwnerReferences())
	}
}

// GenerationChanged reports whether an update of old to obj moves metadata.generation.
func (r *Resource) GenerationChanged(obj, old runtime.Object) bool {
	if r.Strategy.GenerationChanged != nil {
		return r.Strategy.GenerationChanged(obj, old)
	}
	return r.HasSpec() && SpecChanged(obj, old)
}

// Normalize applies the strategy's decoding steps (see Strategy.Normalize).
func (r *Resource) Normalize(obj runtime.Object, request bool) ([]string, error) {
	if r.Strategy.Normalize == nil {
		return nil, nil
	}
	return r.Strategy.Normalize(obj, request)
}

// Default applies the kind's defaults.
func (r *Resource) Default(obj runtime.Object) {
	if r.Strategy.Default != nil {
		r.Strategy.Default(obj)
	}
}

// Validate returns the field errors of a new object.
func (r *Resource) Validate(obj runtime.Object) field.ErrorList {
	if r.Strategy.Validate == nil {
		return nil
	}
	return r.Strategy.Validate(obj)
}

// ValidateUpdate returns the field errors of an update of old to obj through sub ("" for
// the main resource).
func (r *Resource) ValidateUpdate(sub string, obj, old runtime.Object) field.ErrorList {
	if s, ok := r.Strategy.Subresources[sub]; ok && s.ValidateUpdate != nil {
		return s.ValidateUpdate(obj, old)
	}
	if sub == "status" && r.Strategy.ValidateStatusUpdate != nil {
		return r.Strategy.ValidateStatusUpdate(obj, old)
	}
	if r.Strategy.ValidateUpdate == nil {
		return nil
	}
	return r.Strategy.ValidateUpdate(obj, old)
}

// UpdateThrough returns what an update through subresource sub writes, from the current
// state old and the request's object obj: the main resource keeps the status (and what
// the strategy keeps), status keeps the rest, and other subresources follow their rules.
func (r *Resource) UpdateThrough(sub string, obj, old runtime.Object) runtime.Object {
	switch s, ok := r.Strategy.Subresources[sub]; {
	case ok && s.PrepareForUpdate != nil:
		return s.PrepareForUpdate(obj, old)
	case sub == "status":
		r.PrepareForStatusUpdate(obj, old)
	case sub == "":
		r.PrepareForUpdate(obj, old)
	}
	return obj
}

// CheckDelete returns the strategy's refusal of a deletion of obj, if any.
func (r *Resource) CheckDelete(obj runtime.Object) error {
	if r.Strategy.CheckDelete == nil {
		return nil
	}
	return r.Strategy.CheckDelete(obj)
}

// DeletePropagation is how a deletion with opts treats the object's dependents: the
// policy the options name (orphanDependents true means Orphan, false Background), else
// the kind's default.
func (r *Resource) DeletePropagation(opts *metav1.DeleteOptions) metav1.DeletionPropagation {
	switch {
	case opts != nil && opts.PropagationPolicy != nil:
		return *opts.PropagationPolicy
	case opts != nil && opts.OrphanDependents != nil && *opts.OrphanDependents:
		return metav1.DeletePropagationOrphan
	case opts != nil && opts.OrphanDependents != nil:
		return metav1.DeletePropagationBackground
	case r.Strategy.DefaultGarbageCollectionPolicy != "":
		return r.Strategy.DefaultGarbageCollectionPolicy
	}
	return metav1.DeletePropagationBackground
}

// Graceful reports whether deletions of the kind may wait for a grace period.
func (r *Resource) Graceful() bool { return r.Strategy.GracePeriod != nil }

// GracePeriod returns the seconds a deletion of obj waits (0: at once).
func (r *Resource) GracePeriod(obj runtime.Object, opts *metav1.DeleteOptions) int64 {
	if r.Strategy.GracePeriod == nil {
		return 0
	}
	return r.Strategy.GracePeriod(obj, opts)
}

// PrepareForDelete marks obj as its deletion does and reports whether it must wait for
// kind-specific finalization.
func (r *Resource) PrepareForDelete(obj runtime.Object) bool {
	if r.Strategy.PrepareForDelete == nil {
		return false
	}
	return r.Strategy.PrepareForDelete(obj)
}

// Finalizing reports whether obj still waits for kind-specific finalization.
func (r *Resource) Finalizing(obj runtime.Object) bool {
	return r.Strategy.Finalizing != nil && r.Strategy.Finalizing(obj)
}

// Allocate reserves what obj holds exclusively (see Allocator); the returned function is
// never nil when err is nil.
func (r *Resource) Allocate(ctx context.Context, obj, old runtime.Object, dryRun bool) (func(bool), error) {
	if r.Strategy.Allocator == nil {
		return func(bool) {}, nil
	}
	return r.Strategy.Allocator.Allocate(ctx, obj, old, dryRun)
}

// Release frees what a deleted obj held.
func (r *Resource) Release(obj runtime.Object) {
	if r.Strategy.Allocator != nil {
		r.Strategy.Allocator.Release(obj)
	}
}

// typed is the strategy of a kind whose defaults and validation rules are those of the
// defaults and validation packages for the k8s.io/api types; extra adds the kind's own hooks.
func typed(extra Strategy) Strategy {
	if extra.Default == nil {
		extra.Default = defaultTyped
	}
	if extra.Validate == nil {
		extra.Validate = validateTyped
	}
	if extra.ValidateUpdate == nil {
		extra.ValidateUpdate = validateTypedUpdate
	}
	if extra.ValidateStatusUpdate == nil {
		extra.ValidateStatusUpdate = validateTypedStatusUpdate
	}
	return extra
}
