package apiserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubette/kubette/internal/apiserver/watchcache"
	"github.com/kubette/kubette/internal/inprocess/objwatch"
	"github.com/kubette/kubette/internal/registry"
	"github.com/kubette/kubette/internal/storage"
)

// selectors parses the label and field selectors of a list or watch.
func selectors(r *registry.Resource, q map[string][]string) (labels.Selector, fields.Selector, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	ls, err := labels.Parse(get("labelSelector"))
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
	}
	fs, err := fields.ParseSelector(get("fieldSelector"))
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
	}
	// Labels as the API version names them, to those of the stored object's fields.
	fs, err = fs.Transform(func(label, value string) (string, string, error) {
		stored, ok := r.FieldLabel(label)
		if !ok {
			return "", "", fmt.Errorf("field label not supported: %s", label)
		}
		return stored, value, nil
	})
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	return ls, fs, nil
}

// filterFor builds a watch-cache filter from selectors. A custom object stored in
// another version is matched in the requested one: its fields are those its
// conversion (by webhook, ctx's) gives; an object that does not convert is let
// through, for the conversion of the answer to report the failure.
func (s *Server) filterFor(ctx context.Context, r *registry.Resource, ls labels.Selector, fs fields.Selector) watchcache.Filter {
	if ls.Empty() && fs.Empty() {
		return nil
	}
	return func(_ string, obj runtime.Object) bool {
		if !ls.Empty() {
			m, err := meta.Accessor(obj)
			if err != nil || !ls.Matches(labels.Set(m.GetLabels())) {
				return false
			}
		}
		if fs.Empty() {
			return true
		}
		if r.Custom != nil && obj.GetObjectKind().GroupVersionKind().GroupVersion() != r.GroupVersion {
			conv, err := s.convertCustom(ctx, r, obj, r.GroupVersion.Version)
			if err != nil {
				return true
			}
			obj = conv
		}
		return fs.Matches(r.SelectableFields(obj))
	}
}

func (s *Server) handleGet(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	ctx := req.Context()
	q := req.URL.Query()
	if ri.res.Virtual {
		s.handleVirtualGet(w, req, ri)
		return
	}
	var obj runtime.Object
	if c := s.cacheFor(ri.res); c != nil && q.Get("resourceVersion") == "0" {
		cached, _, ok, err := c.Get(ctx, ri.res.Key(ri.namespace, ri.name))
		if err != nil {
			s.writeError(w, req, apierrors.NewInternalError(err))
			return
		}
		if !ok {
			s.writeError(w, req, apierrors.NewNotFound(ri.res.GroupResource(), ri.name))
			return
		}
		obj = cached
	} else {
		got, _, err := s.getFromStorage(ctx, ri.res, ri.namespace, ri.name)
		if err != nil {
			s.writeError(w, req, err)
			return
		}
		obj = got
	}
	out, err := s.served(ctx, ri.res, obj)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	s.respondObject(w, req, ri.res, http.StatusOK, out)
}

// respondObject writes one served object, as a Table or metadata when the client asked.
func (s *Server) respondObject(w http.ResponseWriter, req *http.Request, r *registry.Resource, code int, obj runtime.Object) {
	for _, m := range parseAccept(req.Header.Get("Accept")) {
		switch m.as {
		case "":
			s.writeObject(w, req, code, obj)
			return
		case "Table":
			t, err := s.tableFor(r, []runtime.Object{obj}, req.URL.Query().Get("includeObject"), "")
			if err != nil {
				s.writeError(w, req, err)
				return
			}
			s.writeAs(w, req, code, m.typ, t)
			return
		case "PartialObjectMetadata":
			s.writeAs(w, req, code, m.typ, partialMetadata(obj))
			return
		}
	}
	s.writeError(w, req, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "get", r.GroupResource(), "", "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf", 0, false))
}

func (s *Server) writeAs(w http.ResponseWriter, req *http.Request, code int, typ string, obj runtime.Object) {
	if typ == "protobuf" && !protobufCapable(obj) {
		typ = "json"
	}
	w.Header().Set("Content-Type", contentType(typ))
	w.WriteHeader(code)
	if err := s.codecs.encode(w, typ, obj); err != nil {
		s.log.Error("encode response", "err", err)
	}
}

// partialMetadata returns obj's metadata as a PartialObjectMetadata to be encoded. It
// shares obj's maps and slices (labels, annotations, managedFields, ...) instead of
// deep-copying them: every caller encodes the result at once and drops it, and
// nothing writes it (a watch of pods through a metadata informer, as the garbage
// collector's, deep-copied every pod's metadata with its managedFields per event).
func partialMetadata(obj runtime.Object) *metav1.PartialObjectMetadata {
	p := &metav1.PartialObjectMetadata{}
	if a, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if om, ok := a.GetObjectMeta().(*metav1.ObjectMeta); ok {
			p.ObjectMeta = *om
		}
	}
	p.APIVersion, p.Kind = "meta.k8s.io/v1", "PartialObjectMetadata"
	return p
}

// continueToken is the opaque pagination token, shaped as upstream's.
type continueToken struct {
	APIVersion string `json:"v"`
	RV         int64  `json:"rv"`
	Start      string `json:"start"`
}

func encodeContinue(rev int64, startKey, prefix string) string {
	data, _ := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", RV: rev, Start: strings.TrimPrefix(startKey, prefix)})
	return base64.RawURLEncoding.EncodeToString(data)
}

// latestContinueRV is the revision of a continue token that continues at the latest
// revision: the token a 410 for a compacted continue carries, as upstream's.
const latestContinueRV = -1

// decodeContinue returns the revision (0 for the latest) and the start key of a token.
func decodeContinue(token, prefix string) (int64, string, error) {
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, "", fmt.Errorf("continue key is not valid: %w", err)
	}
	var t continueToken
	if err := json.Unmarshal(data, &t); err != nil || t.APIVersion != "meta.k8s.io/v1" || (t.RV <= 0 && t.RV != latestContinueRV) {
		return 0, "", errors.New("continue key is not valid")
	}
	if strings.Contains(t.Start, "..") || strings.HasPrefix(t.Start, "/") {
		return 0, "", errors.New("continue key is not valid: invalid start")
	}
	if t.RV == latestContinueRV {
		return 0, prefix + t.Start, nil
	}
	return t.RV, prefix + t.Start, nil
}

// errContinueCompacted is upstream's answer to a continue token whose revision has been
// compacted away: 410 Gone with a token that continues from the same key at the latest
// revision (an inconsistent list, as the message says).
func errContinueCompacted(startKey, prefix string) error {
	err := apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
	err.ErrStatus.ListMeta.Continue = encodeContinue(latestContinueRV, startKey, prefix)
	return err
}

func (s *Server) handleList(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	ctx := req.Context()
	q := req.URL.Query()
	ls, fs, err := selectors(ri.res, q)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	if ri.res.Virtual {
		s.handleVirtualList(w, req, ri, ls, fs)
		return
	}
	filter := s.filterFor(ctx, ri.res, ls, fs)
	prefix := ri.res.Prefix(ri.namespace)
	rvParam, cont := q.Get("resourceVersion"), q.Get("continue")
	limit, _ := strconv.ParseInt(q.Get("limit"), 10, 64)
	if cont != "" && rvParam != "" {
		s.writeError(w, req, apierrors.NewBadRequest("specifying resource version is not allowed when using continue"))
		return
	}

	var items []runtime.Object
	var rev, remaining int64
	var next string
	// resourceVersion=0 means any version: serve it from the watch cache. Every other
	// list reads etcd, which is at least as new as any version a client can hold, and so
	// does resourceVersion=0 of a resource without a cache (at etcd's latest revision).
	if c := s.cacheFor(ri.res); c != nil && rvParam == "0" && cont == "" {
		items, rev, err = c.List(ctx, prefix, filter)
		if err != nil {
			s.writeError(w, req, apierrors.NewInternalError(err))
			return
		}
	} else {
		var atRev int64
		startKey := ""
		if cont != "" {
			if atRev, startKey, err = decodeContinue(cont, prefix); err != nil {
				s.writeError(w, req, apierrors.NewBadRequest(err.Error()))
				return
			}
		} else if rvParam != "" {
			if atRev, err = strconv.ParseInt(rvParam, 10, 64); err != nil {
				s.writeError(w, req, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", rvParam)))
				return
			}
		}
		items, rev, next, remaining, err = s.listFromStorage(ctx, ri.res, prefix, atRev, startKey, limit, filter)
		if err != nil {
			if errors.Is(err, storage.ErrCompacted) && cont != "" {
				s.writeError(w, req, errContinueCompacted(startKey, prefix))
				return
			}
			s.writeError(w, req, s.storageError(ri.res, "", err))
			return
		}
		if next != "" {
			next = encodeContinue(rev, next, prefix)
		}
		if filter != nil {
			remaining = 0
		}
	}
	s.respondList(w, req, ri.res, items, rev, next, remaining)
}

// listFromStorage reads a consistent page from the store, filtering as it goes.
func (s *Server) listFromStorage(ctx context.Context, r *registry.Resource, prefix string, atRev int64, startKey string, limit int64, filter watchcache.Filter) ([]runtime.Object, int64, string, int64, error) {
	decode := s.storageDecoder(r)
	var out []runtime.Object
	rev := atRev
	for {
		page := limit
		if page > 0 && filter != nil && page < 500 {
			page = 500
		}
		res, err := s.cfg.Store.List(ctx, prefix, storage.ListOptions{Revision: rev, Limit: page, StartKey: startKey})
		if err != nil {
			return nil, 0, "", 0, err
		}
		rev = res.Revision
		for i, kv := range res.Items {
			obj, err := decode(kv.Key, kv.Value, kv.ModRevision)
			if err != nil {
				s.log.Error("list: undecodable object skipped", "key", kv.Key, "err", err)
				continue
			}
			if filter != nil && !filter(kv.Key, obj) {
				continue
			}
			out = append(out, obj)
			if limit > 0 && int64(len(out)) == limit {
				if i < len(res.Items)-1 || res.More {
					return out, rev, kv.Key + "\x00", res.Remaining + int64(len(res.Items)-1-i), nil
				}
				return out, rev, "", 0, nil
			}
		}
		if !res.More || len(res.Items) == 0 {
			return out, rev, "", 0, nil
		}
		startKey = res.Items[len(res.Items)-1].Key + "\x00"
	}
}

// respondList writes a list, Table or PartialObjectMetadataList as the client asked.
func (s *Server) respondList(w http.ResponseWriter, req *http.Request, r *registry.Resource, items []runtime.Object, rev int64, cont string, remaining int64) {
	lm := metav1.ListMeta{Continue: cont}
	if rev > 0 { // computed objects (virtual resources) have no revision
		lm.ResourceVersion = strconv.FormatInt(rev, 10)
	}
	if remaining > 0 {
		lm.RemainingItemCount = &remaining
	}
	items, err := s.toServedList(req.Context(), r, items)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	for _, m := range parseAccept(req.Header.Get("Accept")) {
		switch m.as {
		case "":
			list := r.NewList()
			objs := items
			if err := meta.SetList(list, objs); err != nil {
				s.writeError(w, req, apierrors.NewInternalError(err))
				return
			}
			la, _ := meta.ListAccessor(list)
			la.SetResourceVersion(lm.ResourceVersion)
			la.SetContinue(lm.Continue)
			la.SetRemainingItemCount(lm.RemainingItemCount)
			list.GetObjectKind().SetGroupVersionKind(r.GroupVersion.WithKind(r.ListKind))
			s.writeObject(w, req, http.StatusOK, list)
			return
		case "Table":
			objs := make([]runtime.Object, len(items))
			for i, it := range items {
				if objs[i], err = s.servedShared(req.Context(), r, it); err != nil {
					s.writeError(w, req, err)
					return
				}
			}
			t, err := s.tableFor(r, objs, req.URL.Query().Get("includeObject"), "")
			if err != nil {
				s.writeError(w, req, err)
				return
			}
			t.ListMeta = lm
			s.writeAs(w, req, http.StatusOK, m.typ, t)
			return
		case "PartialObjectMetadataList":
			pl := &metav1.PartialObjectMetadataList{ListMeta: lm}
			pl.APIVersion, pl.Kind = "meta.k8s.io/v1", "PartialObjectMetadataList"
			for _, it := range items {
				o, err := s.servedShared(req.Context(), r, it)
				if err != nil {
					s.writeError(w, req, err)
					return
				}
				p := partialMetadata(o)
				pl.Items = append(pl.Items, *p)
			}
			s.writeAs(w, req, http.StatusOK, m.typ, pl)
			return
		}
	}
	s.writeError(w, req, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "list", r.GroupResource(), "", "the requested media type is not supported", 0, false))
}

func (s *Server) handleWatch(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	q := req.URL.Query()
	ls, fs, err := selectors(ri.res, q)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	if ri.name != "" {
		fs = fields.AndSelectors(fs, fields.OneTermEqualSelector("metadata.name", ri.name))
	}
	bookmarks := q.Get("allowWatchBookmarks") == "true"
	sendInitial := q.Get("sendInitialEvents") == "true"
	rvParam := q.Get("resourceVersion")
	if q.Has("sendInitialEvents") {
		var errs field.ErrorList
		if q.Get("resourceVersionMatch") != string(metav1.ResourceVersionMatchNotOlderThan) {
			errs = append(errs, field.Forbidden(field.NewPath("resourceVersionMatch"), "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
		}
		if sendInitial && !bookmarks {
			errs = append(errs, field.Forbidden(field.NewPath("allowWatchBookmarks"), "sendInitialEvents requires setting allowWatchBookmarks to true"))
		}
		if len(errs) > 0 {
			s.writeError(w, req, apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind("ListOptions").GroupKind(), "", errs))
			return
		}
	}
	var after int64
	if rvParam != "" && rvParam != "0" {
		if after, err = strconv.ParseInt(rvParam, 10, 64); err != nil {
			s.writeError(w, req, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", rvParam)))
			return
		}
	}
	timeout := time.Duration(1800+rand.IntN(1800)) * time.Second
	if t, err := strconv.ParseInt(q.Get("timeoutSeconds"), 10, 64); err == nil && t > 0 {
		timeout = time.Duration(t) * time.Second
	}
	if m := s.cfg.MaxWatchTimeout; m > 0 && timeout > m {
		timeout = m
	}
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	defer cancel()

	var as, typ string = "", "json"
	// An in-process component's watch (package objwatch) gets the objects themselves,
	// copied by its sink: no media type to choose.
	sink, objects := objwatch.FromContext(req.Context())
	accepted := objects
	for _, m := range parseAccept(req.Header.Get("Accept")) {
		if objects {
			break
		}
		if m.as != "" && m.as != "Table" && m.as != "PartialObjectMetadata" {
			continue
		}
		if m.typ == "protobuf" && m.as == "Table" {
			continue // Tables are JSON only, as upstream: try the next media type
		}
		as, typ, accepted = m.as, m.typ, true
		if typ == "yaml" {
			typ = "json"
		}
		break
	}
	if !accepted {
		s.writeError(w, req, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "watch", ri.res.GroupResource(), "", "the requested media type is not supported", 0, false))
		return
	}

	// The initial events of a watch-list must include every write that finished before
	// the request (resourceVersion "") or before the given version: let the cache catch up.
	cache := s.cacheFor(ri.res)
	if sendInitial && cache != nil {
		want := after
		if rvParam == "" {
			rev, err := s.cfg.Store.CurrentRevision(ctx)
			if err != nil {
				s.writeError(w, req, s.storageError(ri.res, "", err))
				return
			}
			want = rev
		}
		if err := cache.WaitFresh(ctx, want, 3*time.Second); err != nil {
			s.writeError(w, req, apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %v", err), 1))
			return
		}
	}
	wopts := watchcache.WatchOptions{
		Prefix: ri.res.Prefix(ri.namespace), Filter: s.filterFor(ctx, ri.res, ls, fs),
		AfterRevision: after, SendInitialEvents: sendInitial, Bookmarks: bookmarks,
	}
	var watcher *watchcache.Watcher
	var werr error
	if cache != nil {
		watcher, werr = cache.Watch(ctx, wopts)
	} else {
		// No cache (Events, as upstream): this watch is a watch of etcd, its initial
		// state a list of etcd, both decoded for this watcher alone.
		watcher, werr = watchcache.WatchStore(ctx, watchcache.Config{
			Store: s.cfg.Store, Decode: s.storageDecoder(ri.res), Logger: s.log,
		}, wopts)
	}
	ct := contentType(typ)
	if typ == "protobuf" {
		ct += ";stream=watch"
	}
	if objects {
		ct = objwatch.ContentType
		defer sink.End()
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := &watchEncoder{typ: typ, w: w, codec: s.codecs}
	// A watch that cannot start, or whose store watch ends with an error, ends with an
	// ERROR event: 410 Expired for a revision that left the window or was compacted.
	writeWatchError := func(err error) {
		var st *metav1.Status
		var apiErr apierrors.APIStatus
		if errors.Is(err, watchcache.ErrTooOld) {
			st = errorToStatus(apierrors.NewResourceExpired(err.Error()))
		} else if errors.As(err, &apiErr) {
			st = errorToStatus(err)
		} else {
			st = errorToStatus(apierrors.NewInternalError(err))
		}
		if objects {
			sink.SendStatus(ctx, st)
			return
		}
		_ = enc.write(string(watch.Error), st)
	}
	if werr != nil {
		writeWatchError(werr)
		return
	}
	defer watcher.Stop()
	if flusher != nil {
		flusher.Flush()
	}
	s.metrics.watchers.WithLabelValues(ri.res.Plural).Inc()
	defer s.metrics.watchers.WithLabelValues(ri.res.Plural).Dec()
	tw := s.traceWatch(req, ri)
	for {
		ev, ok := watcher.Next(ctx)
		if !ok {
			if err := watcher.Err(); err != nil && ctx.Err() == nil {
				writeWatchError(err)
			}
			return
		}
		s.traceDelivery(tw, ev) // before sending: the watcher's reaction comes after it
		var obj runtime.Object
		shared := false
		if ev.Type == watch.Bookmark {
			obj = bookmarkObject(ri.res, ev.Revision, ev.Key == watchcache.InitialEventsEnd)
			if as == "PartialObjectMetadata" {
				obj = partialMetadata(obj)
			}
		} else {
			var err error
			if obj, err = s.servedShared(ctx, ri.res, ev.Object); err != nil {
				// A custom object its conversion webhook did not convert ends the watch
				// with an ERROR event, as upstream's.
				writeWatchError(err)
				return
			}
			shared = obj == ev.Object && as == ""
			switch as {
			case "Table":
				t, err := s.tableFor(ri.res, []runtime.Object{obj}, q.Get("includeObject"), "")
				if err != nil {
					s.log.Error("watch table", "err", err)
					return
				}
				obj = t
			case "PartialObjectMetadata":
				obj = partialMetadata(obj)
			}
		}
		if objects {
			// Every object but a bookmark is copied for the client: a converted object
			// (served) may share maps and slices with the cache's.
			if !sink.Send(ctx, ev.Type, obj, ev.Type != watch.Bookmark) {
				return
			}
			continue
		}
		if shared {
			// The cache's own object, as served: serialised once for every watcher.
			raw, err := ev.Encoded(typ, func() ([]byte, error) { return enc.encodeObject(obj) })
			if err != nil || enc.writeRaw(string(ev.Type), raw) != nil {
				return
			}
		} else if err := enc.write(string(ev.Type), obj); err != nil {
			return
		}
		if flusher != nil && watcher.Pending() == 0 {
			flusher.Flush()
		}
	}
}
