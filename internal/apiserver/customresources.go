package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/kubette/kubette/internal/apiserver/watchcache"
	"github.com/kubette/kubette/internal/registry"
	"github.com/kubette/kubette/internal/webhookclient"
)

// customCaches are the watch caches of the custom resources being served, one per
// definition (all its versions share the storage prefix), each stopped on its own
// when the definition stops being served or changes.
type customCaches struct {
	mu sync.RWMutex
	// ctx is the server's: a custom cache runs until it is removed or ctx ends.
	ctx    context.Context
	byName map[string]*customCache // by definition name
	byPfx  map[string]*customCache // by storage prefix
}

// customCache is one definition's watch cache and what it was made from.
type customCache struct {
	cache  *watchcache.Cache
	cancel context.CancelFunc
	prefix string
	// def is the definition as installed: a change of its spec or accepted names
	// reinstalls it (a status change alone does not).
	def *apiextensionsv1.CustomResourceDefinition
	// terminating is set once the definition is being deleted: creates are refused.
	terminating atomic.Bool
}

// terminating reports whether the named definition is being deleted.
func (c *customCaches) terminating(name string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	cc := c.byName[name]
	return cc != nil && cc.terminating.Load()
}

// errTerminating is upstream's answer to a create of a custom resource whose
// definition is being deleted.
func errTerminating(r *registry.Resource) error {
	err := apierrors.NewMethodNotSupported(r.GroupResource(), "create")
	err.ErrStatus.Message = "create not allowed while custom resource definition is terminating"
	return err
}

func (c *customCaches) get(prefix string) *watchcache.Cache {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if cc := c.byPfx[prefix]; cc != nil {
		return cc.cache
	}
	return nil
}

// InstallCustomResources serves the resources of a CustomResourceDefinition (every
// served version) or, when it changed since it was installed, serves them anew: its
// watch cache is made again, so that every object is read with the current schemas
// (watches of the old cache end, and clients watch again). A definition installed as
// it is changes nothing. It returns once the new cache has listed the objects.
func (s *Server) InstallCustomResources(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	terminating := apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Terminating)
	s.custom.mu.RLock()
	old := s.custom.byName[crd.Name]
	s.custom.mu.RUnlock()
	if old != nil {
		old.terminating.Store(terminating)
	}
	if old != nil && apiequality.Semantic.DeepEqual(old.def.Spec, crd.Spec) &&
		apiequality.Semantic.DeepEqual(old.def.Status.AcceptedNames, crd.Status.AcceptedNames) {
		return nil
	}
	resources, err := registry.CustomResources(crd)
	if err != nil {
		return fmt.Errorf("serve %s: %w", crd.Name, err)
	}
	if len(resources) == 0 {
		s.RemoveCustomResources(crd.Name)
		return nil
	}
	for _, r := range resources {
		if b, ok := s.table.Lookup(r.GroupVersion, r.Plural); ok && b.Custom == nil {
			return fmt.Errorf("serve %s: %s/%s is a built-in resource", crd.Name, r.GroupVersion, r.Plural)
		}
	}
	prefix := resources[0].Prefix("")
	cctx, cancel := context.WithCancel(s.custom.ctx)
	c := watchcache.New(watchcache.Config{
		Prefix: prefix, Store: s.cfg.Store, Decode: s.storageDecoder(resources[0]),
		Capacity: s.cfg.WatchCacheCapacity, BookmarkInterval: s.cfg.BookmarkInterval, Logger: s.log,
	})
	go c.Run(cctx)
	if err := c.WaitReady(ctx); err != nil {
		cancel()
		return fmt.Errorf("serve %s: the watch cache did not load: %w", crd.Name, err)
	}
	cc := &customCache{cache: c, cancel: cancel, prefix: prefix, def: crd.DeepCopy()}
	cc.terminating.Store(terminating)
	s.custom.mu.Lock()
	prev := s.custom.byName[crd.Name]
	if prev != nil {
		delete(s.custom.byPfx, prev.prefix)
	}
	s.custom.byName[crd.Name] = cc
	s.custom.byPfx[prefix] = cc
	s.table.SetOwned(registry.CustomResourceOwner(crd), resources)
	s.custom.mu.Unlock()
	if prev != nil {
		prev.cancel()
	}
	s.log.Info("serving custom resources", "crd", crd.Name, "versions", len(resources))
	s.publishCustomOpenAPI()
	return nil
}

// publishCustomOpenAPI rebuilds the OpenAPI documents of the served definitions.
func (s *Server) publishCustomOpenAPI() {
	s.custom.mu.RLock()
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(s.custom.byName))
	for _, cc := range s.custom.byName {
		crds = append(crds, cc.def)
	}
	s.custom.mu.RUnlock()
	if err := s.docs.setCustom(crds); err != nil {
		s.log.Error("publish the openapi of custom resources", "err", err)
	}
}

// RemoveCustomResources stops serving the resources of the named definition (its
// objects stay in storage).
func (s *Server) RemoveCustomResources(name string) {
	s.custom.mu.Lock()
	cc := s.custom.byName[name]
	delete(s.custom.byName, name)
	if cc != nil {
		delete(s.custom.byPfx, cc.prefix)
	}
	removed := s.table.RemoveOwned(name)
	s.custom.mu.Unlock()
	if cc != nil {
		cc.cancel()
	}
	if len(removed) > 0 {
		s.log.Info("stopped serving custom resources", "crd", name)
		s.publishCustomOpenAPI()
	}
}

// ServesCustomResources reports whether the named definition's resources are served.
func (s *Server) ServesCustomResources(name string) bool {
	s.custom.mu.RLock()
	defer s.custom.mu.RUnlock()
	return s.custom.byName[name] != nil
}

// decodeCustomStored decodes a custom object from storage (JSON, as upstream stores
// them) in the storage version, read by that version's schema: fields it does not
// know are pruned and its defaults applied, as upstream's storage codec does.
func decodeCustomStored(r *registry.Resource, value []byte) (runtime.Object, error) {
	var m map[string]any
	if err := utiljson.Unmarshal(value, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	u := &unstructured.Unstructured{Object: m}
	if !definesVersion(r, u.GetAPIVersion()) {
		u.SetGroupVersionKind(r.StorageGVK())
	}
	if _, err := r.Normalize(u, false); err != nil {
		return nil, err
	}
	r.Default(u)
	return u, nil
}

// definesVersion reports whether apiVersion is a version of r's definition: an
// object keeps the version it was stored in (a former storage version) until it is
// written again, and is converted from it when read.
func definesVersion(r *registry.Resource, apiVersion string) bool {
	for _, v := range r.Custom.Definition.Spec.Versions {
		if apiVersion == r.GroupVersion.Group+"/"+v.Name {
			return true
		}
	}
	return false
}

// encodeCustomForStorage is a custom object's stored form: JSON.
func encodeCustomForStorage(obj runtime.Object) ([]byte, error) {
	return json.Marshal(obj)
}

// convertCustom returns a custom object in version (a copy when it converts).
func (s *Server) convertCustom(ctx context.Context, r *registry.Resource, obj runtime.Object, version string) (runtime.Object, error) {
	out, err := s.convertCustomList(ctx, r, []runtime.Object{obj}, version)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// convertCustomList returns custom objects in version, as upstream's converter:
// objects already in it are left as they are; the others are converted locally
// (strategy None: only apiVersion changes) or by the definition's conversion
// webhook in one ConversionReview, then read by the target version's schema
// (pruning, defaults). A failed conversion is a 500 naming the webhook.
func (s *Server) convertCustomList(ctx context.Context, r *registry.Resource, objs []runtime.Object, version string) ([]runtime.Object, error) {
	out := make([]runtime.Object, len(objs))
	gv := schema.GroupVersion{Group: r.GroupVersion.Group, Version: version}
	var pending []int
	for i, obj := range objs {
		out[i] = obj
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u.GetAPIVersion() == gv.String() {
			continue
		}
		if conv := r.Custom.Definition.Spec.Conversion; conv != nil && conv.Strategy == apiextensionsv1.WebhookConverter {
			pending = append(pending, i)
			continue
		}
		c := u.DeepCopy()
		c.SetAPIVersion(gv.String())
		out[i] = c
	}
	if len(pending) > 0 {
		in := make([]*unstructured.Unstructured, len(pending))
		for j, i := range pending {
			in[j] = objs[i].(*unstructured.Unstructured)
		}
		converted, err := s.convertByWebhook(ctx, r, in, gv)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("conversion webhook for %s failed: %w", in[0].GroupVersionKind(), err))
		}
		for j, i := range pending {
			out[i] = converted[j]
		}
	}
	for i, obj := range out {
		if obj == objs[i] {
			continue
		}
		if _, err := r.Normalize(obj, false); err == nil {
			r.Default(obj)
		}
	}
	return out, nil
}

// conversionTimeout is how long a conversion webhook may take, as upstream's.
const conversionTimeout = 30 * time.Second

// convertByWebhook sends objs to the definition's conversion webhook and returns
// them in gv. As upstream, the webhook may change only labels and annotations of
// the metadata; the rest is kept from the original.
func (s *Server) convertByWebhook(ctx context.Context, r *registry.Resource, objs []*unstructured.Unstructured, gv schema.GroupVersion) ([]*unstructured.Unstructured, error) {
	hook := r.Custom.Definition.Spec.Conversion.Webhook
	if hook == nil || hook.ClientConfig == nil {
		return nil, errors.New("the definition has no conversion webhook")
	}
	version := ""
	for _, v := range hook.ConversionReviewVersions {
		if v == "v1" || v == "v1beta1" {
			version = v
			break
		}
	}
	if version == "" {
		return nil, fmt.Errorf("no conversionReviewVersions this server speaks (v1, v1beta1) in %v", hook.ConversionReviewVersions)
	}
	req := &apiextensionsv1.ConversionRequest{UID: uuid.NewUUID(), DesiredAPIVersion: gv.String()}
	for _, o := range objs {
		raw, err := json.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		req.Objects = append(req.Objects, runtime.RawExtension{Raw: raw})
	}
	body, err := json.Marshal(&apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/" + version, Kind: "ConversionReview"}, Request: req})
	if err != nil {
		return nil, err
	}
	cc := hook.ClientConfig
	cfg := webhookclient.Config{URL: cc.URL, CABundle: cc.CABundle}
	if sv := cc.Service; sv != nil {
		cfg.Service = &webhookclient.Service{Namespace: sv.Namespace, Name: sv.Name, Path: sv.Path, Port: sv.Port}
	}
	answer, err := s.webhooks.Post(ctx, cfg, conversionTimeout, body)
	if err != nil {
		return nil, err
	}
	var review apiextensionsv1.ConversionReview
	if err := json.Unmarshal(answer, &review); err != nil {
		return nil, fmt.Errorf("the webhook's response is not a ConversionReview: %w", err)
	}
	resp := review.Response
	switch {
	case resp == nil:
		return nil, errors.New("the webhook's ConversionReview has no response")
	case version == "v1" && resp.UID != req.UID:
		return nil, fmt.Errorf("expected response.uid=%q, got %q", req.UID, resp.UID)
	case resp.Result.Status != metav1.StatusSuccess:
		return nil, fmt.Errorf("conversion failed: %s", resp.Result.Message)
	case len(resp.ConvertedObjects) != len(objs):
		return nil, fmt.Errorf("expected %d converted objects, got %d", len(objs), len(resp.ConvertedObjects))
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, raw := range resp.ConvertedObjects {
		c := &unstructured.Unstructured{}
		if err := c.UnmarshalJSON(raw.Raw); err != nil {
			return nil, fmt.Errorf("converted object %d: %w", i, err)
		}
		if c.GetAPIVersion() != gv.String() {
			return nil, fmt.Errorf("invalid apiVersion %q in converted object %d, expected %q", c.GetAPIVersion(), i, gv)
		}
		if c.GetKind() != objs[i].GetKind() {
			return nil, fmt.Errorf("invalid kind %q in converted object %d, expected %q", c.GetKind(), i, objs[i].GetKind())
		}
		labels, annotations := c.GetLabels(), c.GetAnnotations()
		if m, ok := objs[i].Object["metadata"]; ok {
			c.Object["metadata"] = runtime.DeepCopyJSONValue(m)
		}
		c.SetLabels(labels)
		c.SetAnnotations(annotations)
		out[i] = c
	}
	return out, nil
}
