package apiserver

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
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
	if ri.subresource != "" && ri.subresource != "status" && ri.subresource != subEphemeralContainers {
		s.writeError(w, req, apierrors.NewMethodNotSupported(ri.res.GroupResource(), "patch"))
		return
	}
	if pt == types.ApplyYAMLPatchType || pt == "application/apply-patch+json" {
		s.handleApply(w, req, ri, patch, o)
		return
	}
	switch pt {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType:
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
	// Strict field validation of the applied configuration against the Go type.
	probe := ri.res.New()
	warnings, err := s.decodeInto(data, mimeJSON, gvk, probe, o.validation)
	if err != nil {
		s.writeError(w, req, err)
		return
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

// scaleOf builds the autoscaling/v1 Scale of a deployment or replica set.
func scaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	var om metav1.ObjectMeta
	var spec, status int32
	var sel *metav1.LabelSelector
	switch o := obj.(type) {
	case *appsv1.Deployment:
		om, sel, status = o.ObjectMeta, o.Spec.Selector, o.Status.Replicas
		if o.Spec.Replicas != nil {
			spec = *o.Spec.Replicas
		}
	case *appsv1.ReplicaSet:
		om, sel, status = o.ObjectMeta, o.Spec.Selector, o.Status.Replicas
		if o.Spec.Replicas != nil {
			spec = *o.Spec.Replicas
		}
	default:
		return nil, fmt.Errorf("scale is not supported for %T", obj)
	}
	selector := ""
	if sel != nil {
		ls, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return nil, err
		}
		selector = ls.String()
	}
	sc := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: om.Name, Namespace: om.Namespace, UID: om.UID, ResourceVersion: om.ResourceVersion, CreationTimestamp: om.CreationTimestamp},
		Spec:       autoscalingv1.ScaleSpec{Replicas: spec},
		Status:     autoscalingv1.ScaleStatus{Replicas: status, Selector: selector},
	}
	sc.APIVersion, sc.Kind = "autoscaling/v1", "Scale"
	return sc, nil
}

func setReplicas(obj runtime.Object, n int32) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec.Replicas = &n
	case *appsv1.ReplicaSet:
		o.Spec.Replicas = &n
	}
}

func (s *Server) handleGetScale(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	obj, _, err := s.getFromStorage(req.Context(), ri.res, ri.namespace, ri.name)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	sc, err := scaleOf(obj)
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
		sc, err := scaleOf(cur)
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
		setReplicas(cur, want.Spec.Replicas)
		m, _ := meta.Accessor(cur)
		m.SetResourceVersion(want.ResourceVersion)
		return cur, nil
	}, updateOptions{writeOptions: o})
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	sc, err := scaleOf(out)
	if err != nil {
		s.writeError(w, req, apierrors.NewInternalError(err))
		return
	}
	s.writeObject(w, req, http.StatusOK, sc)
}

// handleBinding serves POST pods/binding: it assigns the pod to the target node once.
func (s *Server) handleBinding(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	data, err := readBody(req)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	o := parseWriteOptions(req)
	b := &corev1.Binding{}
	if _, err := s.decodeInto(data, bodyMediaType(req), corev1.SchemeGroupVersion.WithKind("Binding"), b, o.validation); err != nil {
		s.writeError(w, req, err)
		return
	}
	name := ri.name
	if name == "" {
		name = b.Name
	}
	if b.Target.Name == "" {
		s.writeError(w, req, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), name, field.ErrorList{field.Required(field.NewPath("target", "name"), "")}))
		return
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		s.writeError(w, req, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), name, field.ErrorList{field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node"})}))
		return
	}
	_, _, err = s.update(req.Context(), ri.res, ri.namespace, name, func(cur runtime.Object) (runtime.Object, error) {
		return bindPod(cur.(*corev1.Pod), b, ri.res, name, metav1.NewTime(s.cfg.Now().Truncate(1e9)))
	}, updateOptions{writeOptions: o, subresource: "binding"})
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	s.writeConst(w, req, http.StatusCreated, s.bindingCreated)
}

// bindingCreatedStatus is the response to a successful binding, as upstream's.
func bindingCreatedStatus() *metav1.Status {
	st := &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated}
	st.APIVersion, st.Kind = "v1", "Status"
	return st
}

// bindPod returns cur assigned to the binding's node, as upstream's BindingREST: cur is
// the stored state, shared with the watch cache, and stays as it is. The new pod shares
// everything with cur but what the binding changes — the node name, the annotations and
// the conditions — which are its own.
func bindPod(cur *corev1.Pod, b *corev1.Binding, r *registry.Resource, name string, now metav1.Time) (*corev1.Pod, error) {
	if cur.DeletionTimestamp != nil {
		return nil, apierrors.NewConflict(r.GroupResource(), name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", name))
	}
	if b.UID != "" && b.UID != cur.UID {
		return nil, apierrors.NewConflict(r.GroupResource(), name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", b.UID, cur.UID))
	}
	if cur.Spec.NodeName != "" {
		return nil, apierrors.NewConflict(r.GroupResource(), name, fmt.Errorf("pod %s is already assigned to node %q", name, cur.Spec.NodeName))
	}
	if len(cur.Spec.SchedulingGates) != 0 {
		// A pod not ready for scheduling cannot be bound, as upstream.
		return nil, apierrors.NewConflict(r.GroupResource(), name, fmt.Errorf("pod %s has non-empty .spec.schedulingGates", name))
	}
	pod := *cur
	pod.Spec.NodeName = b.Target.Name
	if len(b.Annotations) > 0 {
		pod.Annotations = make(map[string]string, len(cur.Annotations)+len(b.Annotations))
		maps.Copy(pod.Annotations, cur.Annotations)
		maps.Copy(pod.Annotations, b.Annotations)
	}
	pod.Status.Conditions = slices.Clone(cur.Status.Conditions)
	setPodCondition(&pod, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now})
	return &pod, nil
}

func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}
