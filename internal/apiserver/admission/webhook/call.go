package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

// admit runs the mutating webhooks in order, then once more those with
// reinvocationPolicy IfNeeded that a later webhook's change has made stale.
func (m *Mutating) admit(ctx context.Context, a *admission.Attributes, hooks []*compiledWebhook) error {
	var called []*compiledWebhook // IfNeeded webhooks called, in order
	changedAfter := map[*compiledWebhook]bool{}
	for _, h := range hooks {
		changed, err := m.mutateWith(ctx, h, a)
		if err != nil {
			return err
		}
		if changed {
			for _, c := range called {
				if c != h {
					changedAfter[c] = true
				}
			}
		}
		if h.reinvokeIfNeed {
			called = append(called, h)
		}
	}
	for _, h := range called {
		if !changedAfter[h] {
			continue
		}
		if _, err := m.mutateWith(ctx, h, a); err != nil {
			return err
		}
	}
	return nil
}

// mutateWith calls h when it selects the request and reports whether its patch
// changed the object.
func (m *Mutating) mutateWith(ctx context.Context, h *compiledWebhook, a *admission.Attributes) (bool, error) {
	inv, err := m.match(ctx, h, a)
	if err != nil {
		return false, h.failed(m.log, a, err)
	}
	if inv == nil {
		return false, nil
	}
	before := a.Object
	var snapshot runtime.Object
	if before != nil {
		snapshot = before.DeepCopyObject()
	}
	if err := m.call(ctx, inv, a, true); err != nil {
		return false, err
	}
	return snapshot != nil && !reflect.DeepEqual(snapshot, a.Object), nil
}

// call sends one webhook its AdmissionReview and applies the answer. Errors of the
// call are decided by the failure policy; a refusal always refuses.
func (p *Plugin) call(ctx context.Context, inv *invocation, a *admission.Attributes, mutate bool) error {
	h := inv.hook
	obj, old := a.Object, a.OldObject
	var err error
	if inv.resource != a.Resource {
		if obj != nil {
			if obj, err = p.srv.Convert(ctx, obj, inv.resource); err != nil {
				return h.failed(p.log, a, err)
			}
		}
		if old != nil {
			if old, err = p.srv.Convert(ctx, old, inv.resource); err != nil {
				return h.failed(p.log, a, err)
			}
		}
	}
	review, objJSON, err := p.review(inv, a, obj, old)
	if err != nil {
		return h.failed(p.log, a, err)
	}
	body, err := json.Marshal(review)
	if err != nil {
		return h.failed(p.log, a, err)
	}
	answer, err := p.client.Post(ctx, h.endpoint, h.timeout, body)
	if err != nil {
		return h.failed(p.log, a, err)
	}
	resp, err := readResponse(answer, review.Request.UID, h.reviewVersion)
	if err != nil {
		return h.failed(p.log, a, err)
	}
	for _, w := range resp.Warnings {
		admission.AddWarning(ctx, w)
	}
	if !resp.Allowed {
		return denied(h.name, resp.Result)
	}
	if len(resp.Patch) == 0 {
		return nil
	}
	if !mutate {
		return h.failed(p.log, a, errors.New("a validating webhook may not return a patch"))
	}
	if obj == nil {
		return h.failed(p.log, a, errors.New("the webhook returned a patch for a request without an object"))
	}
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		return h.failed(p.log, a, fmt.Errorf("the webhook's patch: %w", err))
	}
	patched, err := patch.Apply(objJSON)
	if err != nil {
		return h.failed(p.log, a, fmt.Errorf("applying the webhook's patch: %w", err))
	}
	if bytes.Equal(patched, objJSON) {
		return nil
	}
	out, err := p.srv.Decode(inv.resource, patched)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("webhook %q: the patched object: %w", h.name, err))
	}
	if inv.resource != a.Resource {
		if out, err = p.srv.Convert(ctx, out, a.Resource); err != nil {
			return apierrors.NewInternalError(fmt.Errorf("webhook %q: the patched object: %w", h.name, err))
		}
	}
	if err := replace(a.Object, out); err != nil {
		return apierrors.NewInternalError(fmt.Errorf("webhook %q: %w", h.name, err))
	}
	return nil
}

// review builds the AdmissionReview of the request as the webhook's version of the
// resource sees it, and returns the object's JSON (what a patch applies to).
func (p *Plugin) review(inv *invocation, a *admission.Attributes, obj, old runtime.Object) (*admissionv1.AdmissionReview, []byte, error) {
	req := &admissionv1.AdmissionRequest{
		UID:                uuid.NewUUID(),
		Kind:               metav1.GroupVersionKind{Group: inv.kind.Group, Version: inv.kind.Version, Kind: inv.kind.Kind},
		Resource:           metav1.GroupVersionResource{Group: inv.resource.Group, Version: inv.resource.Version, Resource: inv.resource.Resource},
		SubResource:        a.Subresource,
		RequestKind:        &metav1.GroupVersionKind{Group: a.Kind.Group, Version: a.Kind.Version, Kind: a.Kind.Kind},
		RequestResource:    &metav1.GroupVersionResource{Group: a.Resource.Group, Version: a.Resource.Version, Resource: a.Resource.Resource},
		RequestSubResource: a.Subresource,
		Name:               a.Name,
		Namespace:          a.Namespace,
		Operation:          admissionv1.Operation(a.Operation),
		DryRun:             &a.DryRun,
	}
	if a.User != nil {
		req.UserInfo = authenticationv1.UserInfo{Username: a.User.Name, UID: a.User.UID, Groups: append([]string(nil), a.User.Groups...)}
		for k, v := range a.User.Extra {
			if req.UserInfo.Extra == nil {
				req.UserInfo.Extra = map[string]authenticationv1.ExtraValue{}
			}
			req.UserInfo.Extra[k] = append(authenticationv1.ExtraValue(nil), v...)
		}
	}
	var objJSON []byte
	var err error
	if obj != nil {
		gvk := inv.kind
		if a.Operation == admission.Connect {
			// A connect's object is its options (PodAttachOptions, ...), typed as such.
			gvk = obj.GetObjectKind().GroupVersionKind()
		}
		if objJSON, err = encode(obj, gvk); err != nil {
			return nil, nil, err
		}
		req.Object.Raw = objJSON
	}
	if old != nil {
		if req.OldObject.Raw, err = encode(old, inv.kind); err != nil {
			return nil, nil, err
		}
	}
	if opts := options(a); opts != nil {
		if req.Options.Raw, err = json.Marshal(opts); err != nil {
			return nil, nil, err
		}
	}
	version := inv.hook.reviewVersion
	if version == "" {
		version = "v1"
	}
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/" + version, Kind: "AdmissionReview"},
		Request:  req,
	}, objJSON, nil
}

// encode is the JSON of obj as a gvk object.
func encode(obj runtime.Object, gvk schema.GroupVersionKind) ([]byte, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		c := u.DeepCopy()
		c.SetGroupVersionKind(gvk)
		return json.Marshal(c.Object)
	}
	c := obj.DeepCopyObject()
	c.GetObjectKind().SetGroupVersionKind(gvk)
	return json.Marshal(c)
}

// options are the request's options as the webhook sees them.
func options(a *admission.Attributes) runtime.Object {
	var dryRun []string
	if a.DryRun {
		dryRun = []string{metav1.DryRunAll}
	}
	tm := metav1.TypeMeta{APIVersion: "meta.k8s.io/v1"}
	switch a.Operation {
	case admission.Create:
		tm.Kind = "CreateOptions"
		return &metav1.CreateOptions{TypeMeta: tm, DryRun: dryRun}
	case admission.Update:
		tm.Kind = "UpdateOptions"
		return &metav1.UpdateOptions{TypeMeta: tm, DryRun: dryRun}
	case admission.Delete:
		tm.Kind = "DeleteOptions"
		return &metav1.DeleteOptions{TypeMeta: tm, DryRun: dryRun}
	}
	return nil
}

// readResponse decodes a webhook's AdmissionReview and checks it as upstream: a
// response for this request's UID, and for v1 a patch only of type JSONPatch.
func readResponse(data []byte, uid types.UID, version string) (*admissionv1.AdmissionResponse, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &review); err != nil {
		return nil, fmt.Errorf("the webhook's response is not an AdmissionReview: %w", err)
	}
	if review.Response == nil {
		return nil, errors.New("the webhook's AdmissionReview has no response")
	}
	r := review.Response
	if version != "v1beta1" {
		if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
			return nil, fmt.Errorf("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got %s, Kind=%s", review.APIVersion, review.Kind)
		}
		if r.UID != uid {
			return nil, fmt.Errorf("expected response.uid=%q, got %q", uid, r.UID)
		}
		if len(r.Patch) > 0 && (r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch) {
			return nil, errors.New("webhook returned response.patch but not response.patchType")
		}
	}
	return r, nil
}

// denied is a webhook's refusal, as upstream's: its status (code 400 at least,
// Failure) with the message prefixed by who refused.
func denied(name string, result *metav1.Status) error {
	st := metav1.Status{Status: metav1.StatusFailure}
	if result != nil {
		st = *result
	}
	if st.Code < http.StatusBadRequest {
		st.Code = http.StatusBadRequest
	}
	if st.Status == "" || st.Status == metav1.StatusSuccess {
		st.Status = metav1.StatusFailure
	}
	by := fmt.Sprintf("admission webhook %q denied the request", name)
	switch {
	case st.Message != "":
		st.Message = by + ": " + st.Message
	case st.Reason != "":
		st.Message = by + ": " + string(st.Reason)
	default:
		st.Message = by + " without explanation"
	}
	return &apierrors.StatusError{ErrStatus: st}
}

// replace makes dst (the request's object, a pointer) hold the value of src.
func replace(dst, src runtime.Object) error {
	if du, ok := dst.(*unstructured.Unstructured); ok {
		su, ok := src.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("the patched object is a %T, not unstructured", src)
		}
		du.Object = su.Object
		return nil
	}
	dv, sv := reflect.ValueOf(dst), reflect.ValueOf(src)
	if dv.Kind() != reflect.Pointer || dv.Type() != sv.Type() {
		return fmt.Errorf("the patched object is a %T, not a %T", src, dst)
	}
	dv.Elem().Set(sv.Elem())
	return nil
}
