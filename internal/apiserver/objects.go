package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubette/kubette/internal/apiserver/watchcache"
	"github.com/kubette/kubette/internal/registry"
	"github.com/kubette/kubette/internal/storage"
)

// storageDecoder decodes a stored object (protobuf, or JSON for a custom one) and
// stamps the revision as resourceVersion.
func (s *Server) storageDecoder(r *registry.Resource) watchcache.Decoder {
	return func(key string, value []byte, rev int64) (runtime.Object, error) {
		if len(value) == 0 {
			return nil, fmt.Errorf("decode %s: empty value", key)
		}
		var obj runtime.Object
		var err error
		if r.Custom != nil {
			obj, err = decodeCustomStored(r, value)
		} else {
			obj, err = decodeStored(s.scheme, value)
		}
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", key, err)
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", key, err)
		}
		m.SetResourceVersion(strconv.FormatInt(rev, 10))
		if r.Custom == nil {
			// A custom object keeps the version it was stored in (decodeCustomStored):
			// after the storage version changes, it is converted from that one.
			obj.GetObjectKind().SetGroupVersionKind(r.StorageGVK())
		}
		return obj, nil
	}
}

// encodeForStorage encodes obj (in the storage version) as upstream stores it: protobuf
// with the kind envelope and no resourceVersion.
func (s *Server) encodeForStorage(r *registry.Resource, obj runtime.Object) ([]byte, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	rv := m.GetResourceVersion()
	m.SetResourceVersion("")
	defer m.SetResourceVersion(rv)
	obj.GetObjectKind().SetGroupVersionKind(r.StorageGVK())
	var data []byte
	if r.Custom != nil {
		data, err = encodeCustomForStorage(obj)
	} else {
		data, err = s.codecs.protoBytes(obj)
	}
	if err != nil {
		return nil, fmt.Errorf("encode %s for storage: %w", r.Kind, err)
	}
	return data, nil
}

// toServed converts a stored object to the resource's served version. The result may
// share memory with obj and must not be modified. Only a custom resource's
// conversion (by its webhook) can fail.
func (s *Server) toServed(ctx context.Context, r *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	if r.Custom != nil {
		return s.convertCustom(ctx, r, obj, r.GroupVersion.Version)
	}
	if r.GroupVersion == r.StorageVersion {
		return obj, nil
	}
	if r.ToServed == nil {
		return obj, nil
	}
	out, err := r.ToServed(obj)
	if err != nil {
		return nil, conversionError(r, err)
	}
	return out, nil
}

// conversionError reports a built-in kind's failed conversion as upstream's apiserver
// does a failed decode into another version: an internal error.
func conversionError(r *registry.Resource, err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return err
	}
	return apierrors.NewInternalError(fmt.Errorf("convert %s: %w", r.Kind, err))
}

// toServedList is toServed of every item, in one conversion request for a custom
// resource converted by its webhook.
func (s *Server) toServedList(ctx context.Context, r *registry.Resource, items []runtime.Object) ([]runtime.Object, error) {
	if r.Custom != nil {
		return s.convertCustomList(ctx, r, items, r.GroupVersion.Version)
	}
	out := make([]runtime.Object, len(items))
	for i, it := range items {
		conv, err := s.toServed(ctx, r, it)
		if err != nil {
			return nil, err
		}
		out[i] = conv
	}
	return out, nil
}

// toStorage converts a served object to the storage version.
func (s *Server) toStorage(ctx context.Context, r *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	if r.Custom != nil {
		return s.convertCustom(ctx, r, obj, r.StorageVersion.Version)
	}
	if r.ToStorage == nil {
		return obj, nil
	}
	out, err := r.ToStorage(obj)
	if err != nil {
		return nil, conversionError(r, err)
	}
	return out, nil
}

// getFromStorage reads one object (storage version) and its mod revision.
func (s *Server) getFromStorage(ctx context.Context, r *registry.Resource, ns, name string) (runtime.Object, int64, error) {
	kv, err := s.cfg.Store.Get(ctx, r.Key(ns, name))
	if err != nil {
		return nil, 0, s.storageError(r, name, err)
	}
	obj, err := s.storageDecoder(r)(kv.Key, kv.Value, kv.ModRevision)
	if err != nil {
		return nil, 0, apierrors.NewInternalError(err)
	}
	return obj, kv.ModRevision, nil
}

// storageError maps storage sentinels to API errors.
func (s *Server) storageError(r *registry.Resource, name string, err error) error {
	gr := r.GroupResource()
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	case errors.Is(err, storage.ErrExists):
		return apierrors.NewAlreadyExists(gr, name)
	case errors.Is(err, storage.ErrConflict):
		return apierrors.NewConflict(gr, name, errors.New(conflictMessage))
	case errors.Is(err, storage.ErrCompacted):
		return apierrors.NewResourceExpired(fmt.Sprintf("the resourceVersion is too old: %v", err))
	case errors.Is(err, storage.ErrFutureRevision):
		return apierrors.NewTimeoutError("Too large resource version", 1)
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return err
	}
	return apierrors.NewInternalError(err)
}

const conflictMessage = "the object has been modified; please apply your changes to the latest version and try again"

// setServedTypeMeta stamps obj with the served kind so that encoders write apiVersion and kind.
func setServedTypeMeta(r *registry.Resource, obj runtime.Object) {
	obj.GetObjectKind().SetGroupVersionKind(r.GroupVersionKind())
}

// served returns a copy of a stored object, converted and stamped for the response.
func (s *Server) served(ctx context.Context, r *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	out, err := s.toServed(ctx, r, obj)
	if err != nil {
		return nil, err
	}
	if out == obj {
		out = obj.DeepCopyObject()
	}
	setServedTypeMeta(r, out)
	return out, nil
}

// servedShared returns a stored object as served without copying when no conversion is
// needed. The result is shared with the cache and must only be read (encoded).
func (s *Server) servedShared(ctx context.Context, r *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	if obj.GetObjectKind().GroupVersionKind() == r.GroupVersionKind() && (r.Custom != nil || r.GroupVersion == r.StorageVersion) {
		return obj, nil
	}
	return s.served(ctx, r, obj)
}

// bookmarkObject builds the object of a BOOKMARK event: the kind with only its resourceVersion.
func bookmarkObject(r *registry.Resource, rev int64, initialEnd bool) runtime.Object {
	obj := r.New()
	m, _ := meta.Accessor(obj)
	m.SetResourceVersion(strconv.FormatInt(rev, 10))
	if initialEnd {
		m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	setServedTypeMeta(r, obj)
	return obj
}
