package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/registry"
	"github.com/kubette/kubette/internal/storage"
)

// writeOptions are the query options shared by the write verbs.
type writeOptions struct {
	dryRun     bool
	manager    string
	validation string
	// patch marks a PATCH: a changed uid is then an invalid field (422), not a failed precondition (409).
	patch bool
	// applied marks a server-side apply: the field manager already recorded the Apply
	// operation, so the write must not record an Update on top of it.
	applied bool
}

func parseWriteOptions(req *http.Request) writeOptions {
	q := req.URL.Query()
	o := writeOptions{manager: q.Get("fieldManager"), validation: q.Get("fieldValidation")}
	for _, d := range q["dryRun"] {
		if d == "All" {
			o.dryRun = true
		}
	}
	if o.manager == "" {
		o.manager = managerFromUserAgent(req.UserAgent())
	}
	if o.validation == "" {
		o.validation = "Warn"
	}
	return o
}

func managerFromUserAgent(ua string) string {
	for i := 0; i < len(ua); i++ {
		if ua[i] == '/' {
			ua = ua[:i]
			break
		}
	}
	if len(ua) > 128 {
		ua = ua[:128]
	}
	return ua
}

func invalid(r *registry.Resource, name string, errs field.ErrorList) error {
	return apierrors.NewInvalid(r.GroupVersionKind().GroupKind(), name, errs)
}

func (s *Server) handleCreate(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	if ri.name != "" || (ri.res.Namespaced && ri.namespace == "") {
		s.writeError(w, req, apierrors.NewMethodNotSupported(ri.res.GroupResource(), "create"))
		return
	}
	data, err := readBody(req)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	o := parseWriteOptions(req)
	obj := ri.res.New()
	warnings, err := s.decodeInto(data, bodyMediaType(req), ri.res.GroupVersionKind(), obj, o.validation)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	out, err := s.create(req.Context(), ri.res, ri.namespace, obj, o)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	warn(w, warnings)
	s.respondObject(w, req, ri.res, http.StatusCreated, out)
}

// create persists a new object given in the served version and returns it as served.
func (s *Server) create(ctx context.Context, r *registry.Resource, ns string, obj runtime.Object, o writeOptions) (runtime.Object, error) {
	if r.Custom != nil && s.custom.terminating(r.Custom.Definition.Name) {
		return nil, errTerminating(r)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if r.Namespaced {
		switch {
		case m.GetNamespace() == "":
			m.SetNamespace(ns)
		case ns != "" && m.GetNamespace() != ns:
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	} else {
		m.SetNamespace("")
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(m.GetGenerateName() + utilrand.String(5))
	}
	if m.GetName() == "" {
		return nil, invalid(r, "", field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name or generateName is required")})
	}
	if err := s.admitNamespace(ctx, r, m.GetNamespace(), m.GetName()); err != nil {
		return nil, err
	}
	m.SetUID(uuid.NewUUID())
	m.SetCreationTimestamp(metav1.NewTime(s.cfg.Now().Truncate(time.Second)))
	m.SetResourceVersion("")
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	m.SetSelfLink("")
	m.SetGeneration(0)
	if r.HasSpec() {
		m.SetGeneration(1)
	}
	r.PrepareForCreateIn(ctx, obj)
	r.Default(obj)
	attrs := s.admissionAttributes(ctx, r, admission.Create, "", obj, nil, o.dryRun)
	if err := s.cfg.Admission.Admit(ctx, attrs); err != nil {
		return nil, err
	}
	// A mutating plugin may have added what needs defaults (a volume, a container).
	r.Default(obj)
	finishAlloc, err := r.Allocate(ctx, obj, nil, o.dryRun)
	if err != nil {
		return nil, err
	}
	created := false
	defer func() { finishAlloc(created) }()
	if errs := r.Validate(obj); len(errs) > 0 {
		return nil, invalid(r, m.GetName(), errs)
	}
	if err := s.cfg.Admission.Validate(ctx, attrs); err != nil {
		return nil, err
	}
	if !o.applied {
		obj = s.fields.update(r, "", nil, obj, o.manager)
	}
	setServedTypeMeta(r, obj)
	if o.dryRun {
		return obj, nil
	}
	stored, err := s.toStorage(ctx, r, obj)
	if err != nil {
		return nil, err
	}
	data, err := s.encodeForStorage(r, stored)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	rev, err := s.cfg.Store.Create(ctx, r.Key(m.GetNamespace(), m.GetName()), data, s.storeOptions(r)...)
	if err != nil {
		return nil, s.storageError(r, m.GetName(), err)
	}
	created = true
	m.SetResourceVersion(strconv.FormatInt(rev, 10))
	setServedTypeMeta(r, obj)
	return obj, nil
}

// mutateFunc turns the current served object (a private copy; nil when absent and
// creation is allowed) into the desired one.
type mutateFunc func(cur runtime.Object) (runtime.Object, error)

// updateOptions tune an update.
type updateOptions struct {
	writeOptions
	subresource string
	// createIfMissing creates the object from mutate(nil) when it does not exist.
	createIfMissing bool
	// force skips the no-op check (used when only metadata such as deletion changes).
	preconditions *metav1.Preconditions
}

// update is the guaranteed-update loop shared by PUT, PATCH and the subresources: read,
// mutate, check, write with compare-and-swap, retry on a conflict the client did not ask for.
//
// As upstream's cacher, the first attempt starts from the watch cache's copy of the
// object, so that an uncontended write costs one etcd transaction (compare the revision
// and put; on a conflict the store answers with the current value). A cached state
// that would make the request fail, or that the request leaves unchanged, may be stale:
// it is read again from etcd before the server answers.
func (s *Server) update(ctx context.Context, r *registry.Resource, ns, name string, mutate mutateFunc, o updateOptions) (runtime.Object, bool, error) {
	key := r.Key(ns, name)
	decode := s.storageDecoder(r)
	var (
		kv        storage.KeyValue
		readErr   error // of the last read from etcd
		curStored runtime.Object
		curRev    int64
		fromCache bool
	)
	if !o.dryRun {
		curStored, curRev, fromCache = s.cachedState(r, key)
	}
	if !fromCache {
		kv, readErr = s.cfg.Store.Get(ctx, key)
	}
	// stale reports whether the state came from the cache and, if so, reads etcd instead.
	stale := func() bool {
		if !fromCache {
			return false
		}
		fromCache = false
		kv, readErr = s.cfg.Store.Get(ctx, key)
		return true
	}
	for attempt := 0; ; attempt++ {
		if !fromCache {
			if errors.Is(readErr, storage.ErrNotFound) {
				if !o.createIfMissing {
					return nil, false, apierrors.NewNotFound(r.GroupResource(), name)
				}
				obj, err := mutate(nil)
				if err != nil {
					return nil, false, err
				}
				if m, err := meta.Accessor(obj); err == nil && m.GetResourceVersion() != "" {
					return nil, false, apierrors.NewNotFound(r.GroupResource(), name)
				}
				out, err := s.create(ctx, r, ns, obj, o.writeOptions)
				if apierrors.IsAlreadyExists(err) && attempt < 10 {
					kv, readErr = s.cfg.Store.Get(ctx, key)
					continue
				}
				return out, true, err
			}
			if readErr != nil {
				return nil, false, s.storageError(r, name, readErr)
			}
			obj, err := decode(kv.Key, kv.Value, kv.ModRevision)
			if err != nil {
				return nil, false, apierrors.NewInternalError(err)
			}
			curStored, curRev = obj, kv.ModRevision
		}
		newObj, cur, userRV, finishAlloc, err := s.prepareUpdate(ctx, r, name, curStored, mutate, o)
		if err != nil {
			if stale() {
				continue
			}
			return nil, false, err
		}
		if newObj == nil { // nothing changes
			if stale() {
				continue
			}
			return cur, false, nil
		}
		newMeta, _ := meta.Accessor(newObj)
		if o.dryRun {
			finishAlloc(false)
			return newObj, false, nil
		}
		var werr error
		if shouldDeleteOnUpdate(r, newObj, newMeta) {
			_, rev, derr := s.cfg.Store.Delete(ctx, key, curRev)
			finishAlloc(false)
			if derr == nil {
				r.Release(newObj)
				newMeta.SetResourceVersion(strconv.FormatInt(rev, 10))
				return newObj, false, nil
			}
			werr = derr
		} else {
			stored, cerr := s.toStorage(ctx, r, newObj)
			if cerr != nil {
				finishAlloc(false)
				return nil, false, cerr
			}
			data, eerr := s.encodeForStorage(r, stored)
			if eerr != nil {
				finishAlloc(false)
				return nil, false, apierrors.NewInternalError(eerr)
			}
			rev, uerr := s.cfg.Store.Update(ctx, key, data, curRev, s.storeOptions(r)...)
			finishAlloc(uerr == nil)
			if uerr == nil {
				newMeta.SetResourceVersion(strconv.FormatInt(rev, 10))
				setServedTypeMeta(r, newObj)
				return newObj, false, nil
			}
			werr = uerr
		}
		var ce *storage.ConflictError
		switch {
		case errors.As(werr, &ce) && (userRV == "" || fromCache) && attempt < 100:
			// A cached state may have been behind what the client saw: only a conflict
			// with the state read from etcd is the client's.
			fromCache = false
			kv, readErr = ce.Current, nil
		case errors.Is(werr, storage.ErrConflict) && (userRV == "" || fromCache) && attempt < 100:
			fromCache = false
			kv, readErr = s.cfg.Store.Get(ctx, key)
		case errors.Is(werr, storage.ErrNotFound) && attempt < 100:
			// Deleted meanwhile: the next round reports 404 or creates.
			fromCache = false
			kv, readErr = storage.KeyValue{}, werr
		default:
			return nil, false, s.storageError(r, name, werr)
		}
	}
}

// cachedState returns the watch cache's copy of key (shared: not to be modified) and
// its revision, without waiting for a cache that has not loaded yet.
func (s *Server) cachedState(r *registry.Resource, key string) (runtime.Object, int64, bool) {
	c := s.cacheFor(r)
	if c == nil {
		return nil, 0, false
	}
	obj, ok := c.Peek(key)
	if !ok {
		return nil, 0, false
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, 0, false
	}
	rev, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	if err != nil || rev <= 0 {
		return nil, 0, false
	}
	return obj, rev, true
}

// prepareUpdate runs one round of an update on the stored state curStored: it returns
// the object to write, or a nil object when the update changes nothing (cur is then the
// served current state), and the resourceVersion the client required ("" for none).
//
// finish (never nil when err is nil) must be called with whether newObj was written: it
// releases the Service allocations the outcome left unused.
func (s *Server) prepareUpdate(ctx context.Context, r *registry.Resource, name string, curStored runtime.Object, mutate mutateFunc, o updateOptions) (newObj, cur runtime.Object, userRV string, finish func(bool), err error) {
	finish = func(bool) {}
	if o.subresource == "binding" {
		// The binding only reads the current state (it changes a copy, and the state
		// is never returned): the cache's copy serves as it is.
		cur, err = s.servedShared(ctx, r, curStored)
	} else {
		cur, err = s.served(ctx, r, curStored)
	}
	if err != nil {
		return nil, nil, "", nil, err
	}
	curMeta, _ := meta.Accessor(cur)
	if err := checkPreconditions(r, name, curMeta, o.preconditions); err != nil {
		return nil, nil, "", nil, err
	}
	if o.subresource == "binding" {
		// The binding copies what it changes (bindPod): it gets the state as it is.
		newObj, err = mutate(cur)
	} else {
		newObj, err = mutate(cur.DeepCopyObject())
	}
	if err != nil {
		return nil, nil, "", nil, err
	}
	newMeta, err := meta.Accessor(newObj)
	if err != nil {
		return nil, nil, "", nil, apierrors.NewBadRequest(err.Error())
	}
	if uid := newMeta.GetUID(); uid != "" && uid != curMeta.GetUID() {
		if o.patch {
			return nil, nil, "", nil, invalid(r, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), uid, "field is immutable")})
		}
		return nil, nil, "", nil, apierrors.NewConflict(r.GroupResource(), name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, curMeta.GetUID()))
	}
	userRV = newMeta.GetResourceVersion()
	if userRV != "" && userRV != curMeta.GetResourceVersion() {
		return nil, nil, "", nil, apierrors.NewConflict(r.GroupResource(), name, errors.New(conflictMessage))
	}
	if o.subresource == "binding" {
		// As upstream's BindingREST: the pod as the binding changed it, written as it
		// is — no defaulting, validation or managedFields entry.
		keepImmutableMeta(newMeta, curMeta)
		newMeta.SetResourceVersion(curMeta.GetResourceVersion())
		setServedTypeMeta(r, newObj)
		return newObj, cur, userRV, finish, nil
	}
	newObj = r.UpdateThrough(o.subresource, newObj, cur)
	newMeta, _ = meta.Accessor(newObj)
	keepImmutableMeta(newMeta, curMeta)
	r.Default(newObj)
	attrs := s.admissionAttributes(ctx, r, admission.Update, o.subresource, newObj, cur, o.dryRun)
	if err := s.cfg.Admission.Admit(ctx, attrs); err != nil {
		return nil, nil, "", nil, err
	}
	newObj = attrs.Object
	newMeta, _ = meta.Accessor(newObj)
	keepImmutableMeta(newMeta, curMeta)
	if o.subresource == "" && r.GenerationChanged(newObj, cur) {
		newMeta.SetGeneration(curMeta.GetGeneration() + 1)
	}
	if o.subresource == "" {
		if finish, err = r.Allocate(ctx, newObj, cur, o.dryRun); err != nil {
			return nil, nil, "", nil, err
		}
	}
	// An unconditional update (no resourceVersion, as every patch and a PUT without
	// one) is validated with the version it replaces, as upstream's store sets it
	// before validation (whose metadata rules require one on an update).
	newMeta.SetResourceVersion(curMeta.GetResourceVersion())
	if errs := r.ValidateUpdate(o.subresource, newObj, cur); len(errs) > 0 {
		finish(false)
		return nil, nil, "", nil, invalid(r, name, errs)
	}
	if err := s.cfg.Admission.Validate(ctx, attrs); err != nil {
		finish(false)
		return nil, nil, "", nil, err
	}
	setServedTypeMeta(r, newObj)
	if unchanged(newObj, cur) {
		finish(false)
		return nil, cur, userRV, nil, nil
	}
	if !o.applied {
		newObj = s.fields.update(r, o.subresource, cur, newObj, o.manager)
	}
	setServedTypeMeta(r, newObj)
	return newObj, cur, userRV, finish, nil
}

// keepImmutableMeta restores the metadata a client can never change.
func keepImmutableMeta(m, cur metav1.Object) {
	m.SetName(cur.GetName())
	m.SetNamespace(cur.GetNamespace())
	m.SetUID(cur.GetUID())
	m.SetCreationTimestamp(cur.GetCreationTimestamp())
	m.SetDeletionTimestamp(cur.GetDeletionTimestamp())
	m.SetDeletionGracePeriodSeconds(cur.GetDeletionGracePeriodSeconds())
	m.SetGeneration(cur.GetGeneration())
	m.SetSelfLink("")
}

// unchanged reports whether an update changes nothing but bookkeeping.
func unchanged(newObj, cur runtime.Object) bool {
	nm, _ := meta.Accessor(newObj)
	cm, _ := meta.Accessor(cur)
	saved := nm.GetManagedFields()
	nm.SetManagedFields(cm.GetManagedFields())
	eq := apiequality.Semantic.DeepEqual(newObj, cur)
	nm.SetManagedFields(saved)
	return eq
}

// shouldDeleteOnUpdate reports whether an object marked for deletion has nothing left to wait for.
func shouldDeleteOnUpdate(r *registry.Resource, obj runtime.Object, m metav1.Object) bool {
	if m.GetDeletionTimestamp() == nil || len(m.GetFinalizers()) > 0 {
		return false
	}
	if g := m.GetDeletionGracePeriodSeconds(); g != nil && *g > 0 {
		return false
	}
	return !r.Finalizing(obj)
}

func checkPreconditions(r *registry.Resource, name string, m metav1.Object, p *metav1.Preconditions) error {
	if p == nil {
		return nil
	}
	if p.UID != nil && *p.UID != m.GetUID() {
		return apierrors.NewConflict(r.GroupResource(), name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, m.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != m.GetResourceVersion() {
		return apierrors.NewConflict(r.GroupResource(), name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, m.GetResourceVersion()))
	}
	return nil
}

func (s *Server) handleUpdate(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	data, err := readBody(req)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	o := parseWriteOptions(req)
	target := ri.res.New()
	gvk := ri.res.GroupVersionKind()
	if ri.subresource == "scale" {
		s.updateScale(w, req, ri, data, "", o)
		return
	}
	warnings, err := s.decodeInto(data, bodyMediaType(req), gvk, target, o.validation)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	m, _ := meta.Accessor(target)
	if m.GetName() != ri.name {
		s.writeError(w, req, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), ri.name)))
		return
	}
	if ri.res.Namespaced && m.GetNamespace() != "" && m.GetNamespace() != ri.namespace {
		s.writeError(w, req, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request"))
		return
	}
	out, created, err := s.update(req.Context(), ri.res, ri.namespace, ri.name, func(runtime.Object) (runtime.Object, error) {
		return target.DeepCopyObject(), nil
	}, updateOptions{writeOptions: o, subresource: ri.subresource, createIfMissing: ri.res.AllowCreateOnUpdate && ri.subresource == ""})
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	warn(w, warnings)
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	s.respondObject(w, req, ri.res, code, out)
}

// deleteOptions reads DeleteOptions from the body or the query.
func (s *Server) deleteOptions(req *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	data, err := readBody(req)
	if err != nil {
		return nil, err
	}
	if len(data) > 0 {
		gvk := metav1.SchemeGroupVersion.WithKind("DeleteOptions")
		if _, err := s.decodeInto(data, bodyMediaType(req), gvk, opts, "Ignore"); err != nil {
			return nil, err
		}
	}
	q := req.URL.Query()
	if v := q.Get("gracePeriodSeconds"); v != "" {
		g, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid gracePeriodSeconds %q", v))
		}
		opts.GracePeriodSeconds = &g
	}
	if v := q.Get("propagationPolicy"); v != "" {
		p := metav1.DeletionPropagation(v)
		opts.PropagationPolicy = &p
	}
	if v := q.Get("orphanDependents"); v != "" {
		b := v == "true"
		opts.OrphanDependents = &b
	}
	if q.Get("dryRun") == "All" {
		opts.DryRun = []string{"All"}
	}
	if opts.PropagationPolicy != nil {
		switch *opts.PropagationPolicy {
		case metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan:
		default:
			return nil, apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind("DeleteOptions").GroupKind(), "", field.ErrorList{
				field.NotSupported(field.NewPath("propagationPolicy"), *opts.PropagationPolicy, []string{"Foreground", "Background", "Orphan", "nil"})})
		}
	}
	return opts, nil
}

func (s *Server) handleDelete(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	if ri.subresource != "" {
		s.writeError(w, req, apierrors.NewMethodNotSupported(ri.res.GroupResource(), "delete"))
		return
	}
	opts, err := s.deleteOptions(req)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	out, done, err := s.delete(req.Context(), ri.res, ri.namespace, ri.name, opts)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	// As upstream: 202 only when the deletion is not immediate and the client asked for
	// cascading with orphanDependents=false; otherwise 200.
	code := http.StatusOK
	if !done && opts.OrphanDependents != nil && !*opts.OrphanDependents {
		code = http.StatusAccepted
	}
	if done && !ri.res.ReturnDeletedObject {
		m, _ := meta.Accessor(out)
		st := &metav1.Status{Status: metav1.StatusSuccess, Details: &metav1.StatusDetails{
			Name: m.GetName(), Group: ri.res.GroupVersion.Group, Kind: ri.res.Plural, UID: m.GetUID()}}
		st.APIVersion, st.Kind = "v1", "Status"
		s.writeObject(w, req, code, st)
		return
	}
	s.respondObject(w, req, ri.res, code, out)
}

// delete removes an object or, when something must happen first (finalizers, a
// graceful pod shutdown, a foreground or orphan cascade), marks it for deletion. done
// reports that the object is gone.
func (s *Server) delete(ctx context.Context, r *registry.Resource, ns, name string, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	key := r.Key(ns, name)
	dryRun := len(opts.DryRun) > 0
	for attempt := 0; attempt < 100; attempt++ {
		cur, rev, err := s.getFromStorage(ctx, r, ns, name)
		if err != nil {
			return nil, false, err
		}
		out, err := s.served(ctx, r, cur)
		if err != nil {
			return nil, false, err
		}
		m, _ := meta.Accessor(out)
		if err := checkPreconditions(r, name, m, opts.Preconditions); err != nil {
			return nil, false, err
		}
		if err := r.CheckDelete(out); err != nil {
			return nil, false, err
		}
		if attempt == 0 {
			attrs := s.admissionAttributes(ctx, r, admission.Delete, "", nil, out, dryRun)
			if err := s.cfg.Admission.Admit(ctx, attrs); err != nil {
				return nil, false, err
			}
			if err := s.cfg.Admission.Validate(ctx, attrs); err != nil {
				return nil, false, err
			}
		}
		grace := r.GracePeriod(out, opts)
		// The strategy may add finalizers of its own (a CustomResourceDefinition's
		// clean-up of its objects), so they are read after it.
		pending := r.PrepareForDelete(out)
		finalizers := m.GetFinalizers()
		policy := r.DeletePropagation(opts)
		if m.GetDeletionTimestamp() == nil {
			switch policy {
			case metav1.DeletePropagationForeground:
				finalizers = addString(finalizers, metav1.FinalizerDeleteDependents)
			case metav1.DeletePropagationOrphan:
				finalizers = addString(finalizers, metav1.FinalizerOrphanDependents)
			}
		}
		s.observeDelete(r, name)
		if len(finalizers) == 0 && grace == 0 && !pending {
			if dryRun {
				return out, true, nil
			}
			_, drev, err := s.cfg.Store.Delete(ctx, key, rev)
			if errors.Is(err, storage.ErrConflict) {
				continue
			}
			if err != nil {
				return nil, false, s.storageError(r, name, err)
			}
			r.Release(out)
			m.SetResourceVersion(strconv.FormatInt(drev, 10))
			return out, true, nil
		}
		// Mark for deletion (or shorten a pending graceful deletion).
		now := metav1.NewTime(s.cfg.Now().Truncate(time.Second))
		if dt := m.GetDeletionTimestamp(); dt != nil {
			old := m.GetDeletionGracePeriodSeconds()
			if !r.Graceful() || old == nil || grace >= *old {
				return out, false, nil
			}
		}
		if m.GetDeletionTimestamp() == nil && m.GetGeneration() > 0 {
			m.SetGeneration(m.GetGeneration() + 1)
		}
		dt := metav1.NewTime(now.Add(time.Duration(grace) * time.Second))
		m.SetDeletionTimestamp(&dt)
		m.SetDeletionGracePeriodSeconds(&grace)
		m.SetFinalizers(finalizers)
		if dryRun {
			return out, false, nil
		}
		stored, err := s.toStorage(ctx, r, out)
		if err != nil {
			return nil, false, err
		}
		data, err := s.encodeForStorage(r, stored)
		if err != nil {
			return nil, false, apierrors.NewInternalError(err)
		}
		nrev, err := s.cfg.Store.Update(ctx, key, data, rev, s.storeOptions(r)...)
		if errors.Is(err, storage.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, false, s.storageError(r, name, err)
		}
		m.SetResourceVersion(strconv.FormatInt(nrev, 10))
		setServedTypeMeta(r, out)
		return out, false, nil
	}
	return nil, false, apierrors.NewConflict(r.GroupResource(), name, errors.New("too many concurrent changes, try again"))
}

func addString(list []string, s string) []string {
	for _, v := range list {
		if v == s {
			return list
		}
	}
	return append(append([]string{}, list...), s)
}

func (s *Server) handleDeleteCollection(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	ctx := req.Context()
	opts, err := s.deleteOptions(req)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	ls, fs, err := selectors(ri.res, req.URL.Query())
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	items, rev, _, _, err := s.listFromStorage(ctx, ri.res, ri.res.Prefix(ri.namespace), 0, "", 0, s.filterFor(ctx, ri.res, ls, fs))
	if err != nil {
		s.writeError(w, req, s.storageError(ri.res, "", err))
		return
	}
	var deleted []runtime.Object
	for _, it := range items {
		m, _ := meta.Accessor(it)
		out, _, err := s.delete(ctx, ri.res, m.GetNamespace(), m.GetName(), opts)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			s.writeError(w, req, err)
			return
		}
		deleted = append(deleted, out)
	}
	s.respondList(w, req, ri.res, deleted, rev, "", 0)
}
