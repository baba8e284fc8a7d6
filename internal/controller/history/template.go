package history

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TemplatePatch is the data of a revision of a workload with template: the strategic
// merge patch {"spec":{"template":{...,"$patch":"replace"}}} that puts the template
// back, which is what `kubectl rollout undo` applies to the workload. The bytes are those
// upstream 1.32 writes (its encoding of an unset metadata.creationTimestamp, null, which
// this version of the API types leaves out, included), since upstream's clients find a
// workload's current revision by comparing them.
func TemplatePatch(template *corev1.PodTemplateSpec) ([]byte, error) {
	b, err := json.Marshal(template)
	if err != nil {
		return nil, fmt.Errorf("encode pod template: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode pod template: %w", err)
	}
	md, _ := m["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		m["metadata"] = md
	}
	if _, ok := md["creationTimestamp"]; !ok {
		md["creationTimestamp"] = nil
	}
	m["$patch"] = "replace"
	out, err := json.Marshal(map[string]any{"spec": map[string]any{"template": m}})
	if err != nil {
		return nil, fmt.Errorf("encode revision data: %w", err)
	}
	return out, nil
}

// TemplateOf returns the pod template a revision made by TemplatePatch holds.
func TemplateOf(rev *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	var data struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(rev.Data.Raw, &data); err != nil {
		return nil, fmt.Errorf("decode revision %s: %w", rev.Name, err)
	}
	return &data.Spec.Template, nil
}
