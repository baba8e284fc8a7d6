package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/kubette/kubette/internal/registry"
)

// applyPatch applies a patch of the given type to the JSON of an object; schema is an
// empty object of the patched Go type (for strategic merge).
func applyPatch(patchType types.PatchType, cur, patch []byte, schema runtime.Object, gr schema.GroupResource) ([]byte, error) {
	switch patchType {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding JSON patch: %v", err))
		}
		out, err := p.Apply(cur)
		if err != nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", gr, "", fmt.Sprintf("the server rejected our request due to an error in our request: %v", err), 0, false)
		}
		return out, nil
	case types.MergePatchType:
		out, err := jsonpatch.MergePatch(cur, patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error applying merge patch: %v", err))
		}
		return out, nil
	case types.StrategicMergePatchType:
		out, err := strategicpatch.StrategicMergePatch(cur, patch, schema)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error applying strategic merge patch: %v", err))
		}
		return out, nil
	}
	return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", gr, "", fmt.Sprintf("the server does not support patch type %q", patchType), 0, false)
}

func (s *Server) handlePatch(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	patch, err := readBody(req)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	o := parseWriteOptions(req)
	o.patch = true
	pt := types.PatchType(bodyMediaType(req))
	if ri.subresource == "scale" {
		s.updateScale(w, req, ri, patch, pt, o)
		return
	}
	if ri.subresource != "" && !ri.res.SubresourceServes(ri.subresource, "patch") {
		s.writeError(w, req, apierrors.NewMethodNotSupported(ri.res.GroupResource(), "patch"))
		return
	}
	if pt == types.ApplyYAMLPatchType || pt == "application/apply-patch+json" {
		s.handleApply(w, req, ri, patch, o)
		return
	}
	switch {
	case pt == types.StrategicMergePatchType && ri.res.Custom != nil:
		s.writeError(w, req, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", ri.res.GroupResource(), "", "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml", 0, false))
		return
	case pt == types.JSONPatchType, pt == types.MergePatchType, pt == types.StrategicMergePatchType:
	default:
		s.writeError(w, req, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", ri.res.GroupResource(), "", fmt.Sprintf("the server does not support patch type %q", pt), 0, false))
		return
	}
	var warnings []string
	out, _, err := s.update(req.Context(), ri.res, ri.namespace, ri.name, func(cur runtime.Object) (runtime.Object, error) {
		curJSON, err := json.Marshal(cur)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		newJSON, err := applyPatch(pt, curJSON, patch, ri.res.New(), ri.res.GroupResource())
		if err != nil {
			return nil, err
		}
		obj := ri.res.New()
		w, err := s.decodeInto(newJSON, mimeJSON, ri.res.GroupVersionKind(), obj, o.validation)
		if err != nil {
			return nil, err
		}
		warnings = w
		// A resourceVersion in the patch is a precondition; otherwise the patch applies to
		// whatever is current, and a concurrent write means patching again, not a 409.
		if !patchSetsResourceVersion(pt, patch) {
			m, _ := meta.Accessor(obj)
			m.SetResourceVersion("")
		}
		return obj, nil
	}, updateOptions{writeOptions: o, subresource: ri.subresource})
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	warn(w, warnings)
	s.respondObject(w, req, ri.res, http.StatusOK, out)
}

// patchSetsResourceVersion reports whether a merge-style patch names metadata.resourceVersion.
func patchSetsResourceVersion(pt types.PatchType, patch []byte) bool {
	if pt == types.JSONPatchType {
		var ops []map[string]interface{}
		if json.Unmarshal(patch, &ops) == nil {
			for _, op := range ops {
				if op["path"] == "/metadata/resourceVersion" {
					return true
				}
			}
		}
		return false
	}
	var p struct {
		Metadata struct {
			ResourceVersion *string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	return json.Unmarshal(patch, &p) == nil && p.Metadata.ResourceVersion != nil && *p.Metadata.ResourceVersion != ""
}

// handleApply serves server-side apply: the field manager merges the applied
// configuration into the live object and tracks ownership, creating the object if absent.
func (s *Server) handleApply(w http.ResponseWriter, req *http.Request, ri *requestInfo, patch []byte, o writeOptions) {
	if req.URL.Query().Get("fieldManager") == "" {
		s.writeError(w, req, apierrors.NewBadRequest("PATCH with apply requires fieldManager to be set"))
		return
	}
	data, err := yaml.YAMLToJSON(patch)
	if err != nil {
		s.writeError(w, req, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err)))
		return
	}
	applied := &unstructured.Unstructured{}
	if err := applied.UnmarshalJSON(data); err != nil {
		s.writeError(w, req, apierrors.NewBadRequest(fmt.Sprintf("error decoding apply configuration: %v", err)))
		return
	}
	gvk := ri.res.GroupVersionKind()
	if applied.GroupVersionKind() != gvk {
		s.writeError(w, req, kindMismatch(gvk, applied.GroupVersionKind()))
		return
	}
	if applied.GetName() != "" && applied.GetName() != ri.name {
		s.writeError(w, req, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", applied.GetName(), ri.name)))
		return
	}
	var warnings []string
	if o.validation != "Ignore" {
		// Duplicate keys, which YAMLToJSON resolves silently, as upstream's apply path
		// reports them.
		if err := yaml.UnmarshalStrict(patch, &map[string]any{}); err != nil {
			if o.validation == "Strict" {
				s.writeError(w, req, apierrors.NewBadRequest(fmt.Sprintf("error strict decoding YAML: %v", err)))
				return
			}
			warnings = append(warnings, err.Error())
		}
	}
	if ri.res.Custom == nil {
		// Strict field validation of the applied configuration against the Go type (a
		// custom resource's schema checks it in the field manager's typed conversion).
		probe := ri.res.New()
		ws, err := s.decodeInto(data, mimeJSON, gvk, probe, o.validation)
		if err != nil {
			s.writeError(w, req, err)
			return
		}
		warnings = append(warnings, ws...)
	}
	force := req.URL.Query().Get("force") == "true"
	o.applied = true
	out, created, err := s.update(req.Context(), ri.res, ri.namespace, ri.name, func(cur runtime.Object) (runtime.Object, error) {
		live := cur
		if live == nil {
			live = ri.res.New()
			m, _ := meta.Accessor(live)
			m.SetName(ri.name)
			m.SetNamespace(ri.namespace)
			setServedTypeMeta(ri.res, live)
		}
		result, err := s.fields.apply(ri.res, ri.subresource, live, applied, o.manager, force)
		if err != nil {
			return nil, err
		}
		if applied.GetResourceVersion() == "" {
			m, _ := meta.Accessor(result)
			m.SetResourceVersion("")
		}
		return result, nil
	}, updateOptions{writeOptions: o, subresource: ri.subresource, createIfMissing: ri.subresource == ""})
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

// scaleOf builds the autoscaling/v1 Scale of obj through its kind's scale strategy.
func scaleOf(r *registry.Resource, obj runtime.Object) (*autoscalingv1.Scale, error) {
	if r.Strategy.Scale == nil {
		return nil, fmt.Errorf("%s has no scale subresource", r.GroupResource())
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	spec, status, selector, err := r.Strategy.Scale.Replicas(obj)
	if err != nil {
		return nil, err
	}
	sc := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp()},
		Spec:       autoscalingv1.ScaleSpec{Replicas: spec},
		Status:     autoscalingv1.ScaleStatus{Replicas: status, Selector: selector},
	}
	sc.APIVersion, sc.Kind = "autoscaling/v1", "Scale"
	return sc, nil
}

func (s *Server) handleGetScale(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	obj, _, err := s.getFromStorage(req.Context(), ri.res, ri.namespace, ri.name)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	sc, err := scaleOf(ri.res, obj)
	if err != nil {
		s.writeError(w, req, apierrors.NewInternalError(err))
		return
	}
	s.writeObject(w, req, http.StatusOK, sc)
}

// updateScale serves PUT (pt empty) and PATCH of the scale subresource.
func (s *Server) updateScale(w http.ResponseWriter, req *http.Request, ri *requestInfo, body []byte, pt types.PatchType, o writeOptions) {
	scaleGVK := autoscalingv1.SchemeGroupVersion.WithKind("Scale")
	out, _, err := s.update(req.Context(), ri.res, ri.namespace, ri.name, func(cur runtime.Object) (runtime.Object, error) {
		sc, err := scaleOf(ri.res, cur)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		want := &autoscalingv1.Scale{}
		if pt == "" {
			if _, err := s.decodeInto(body, bodyMediaType(req), scaleGVK, want, o.validation); err != nil {
				return nil, err
			}
		} else {
			curJSON, _ := json.Marshal(sc)
			newJSON, err := applyPatch(pt, curJSON, body, &autoscalingv1.Scale{}, ri.res.GroupResource())
			if err != nil {
				return nil, err
			}
			if _, err := s.decodeInto(newJSON, mimeJSON, scaleGVK, want, o.validation); err != nil {
				return nil, err
			}
			if !patchSetsResourceVersion(pt, body) {
				want.ResourceVersion = ""
			}
		}
		if want.Spec.Replicas < 0 {
			return nil, apierrors.NewInvalid(scaleGVK.GroupKind(), ri.name, field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), want.Spec.Replicas, "must be greater than or equal to 0")})
		}
		ri.res.Strategy.Scale.SetReplicas(cur, want.Spec.Replicas)
		m, _ := meta.Accessor(cur)
		m.SetResourceVersion(want.ResourceVersion)
		return cur, nil
	}, updateOptions{writeOptions: o})
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	sc, err := scaleOf(ri.res, out)
	if err != nil {
		s.writeError(w, req, apierrors.NewInternalError(err))
		return
	}
	s.writeObject(w, req, http.StatusOK, sc)
}
