package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func validReplicationController() *corev1.ReplicationController {
	return defaulted(&corev1.ReplicationController{
		ObjectMeta: objectMeta("web"),
		Spec: corev1.ReplicationControllerSpec{
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
			},
		},
	})
}

func TestValidateReplicationController(t *testing.T) {
	rcWith := func(mutate func(rc *corev1.ReplicationController)) *corev1.ReplicationController {
		rc := validReplicationController()
		mutate(rc)
		return rc
	}
	runCreateCases(t, []createCase{
		{name: "valid (selector defaulted)", obj: validReplicationController()},
		{name: "selector required", obj: rcWith(func(rc *corev1.ReplicationController) { rc.Spec.Selector = nil }), errors: []want{req("spec.selector")}},
		{name: "template required", obj: rcWith(func(rc *corev1.ReplicationController) { rc.Spec.Template = nil }), errors: []want{req("spec.template")}},
		{name: "selector mismatch", obj: rcWith(func(rc *corev1.ReplicationController) { rc.Spec.Selector = map[string]string{"app": "db"} }),
			errors: []want{invd("spec.template.metadata.labels", "`selector` does not match template `labels`")}},
		{name: "negative replicas", obj: rcWith(func(rc *corev1.ReplicationController) { rc.Spec.Replicas = ptr(int32(-1)) }), errors: []want{inv("spec.replicas")}},
		{name: "negative minReadySeconds", obj: rcWith(func(rc *corev1.ReplicationController) { rc.Spec.MinReadySeconds = -1 }), errors: []want{inv("spec.minReadySeconds")}},
		{name: "restartPolicy OnFailure", obj: rcWith(func(rc *corev1.ReplicationController) {
			rc.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		}),
			errors: []want{unsup("spec.template.spec.restartPolicy")}},
		{name: "activeDeadlineSeconds", obj: rcWith(func(rc *corev1.ReplicationController) { rc.Spec.Template.Spec.ActiveDeadlineSeconds = ptr(int64(5)) }),
			errors: []want{forbd("spec.template.spec.activeDeadlineSeconds", "activeDeadlineSeconds in ReplicationController is not Supported")}},
		{name: "bad name", obj: rcWith(func(rc *corev1.ReplicationController) { rc.Name = "Web" }), errors: []want{inv("metadata.name")}},
		{name: "container required", obj: rcWith(func(rc *corev1.ReplicationController) { rc.Spec.Template.Spec.Containers = nil }), errors: []want{req("spec.template.spec.containers")}},
	})
	old := stored(validReplicationController())
	reselected := old.DeepCopy()
	reselected.Spec.Selector = map[string]string{"app": "web", "tier": "fe"}
	reselected.Spec.Template.Labels["tier"] = "fe"
	mismatched := old.DeepCopy()
	mismatched.Spec.Selector = map[string]string{"app": "db"}
	badStatus := old.DeepCopy()
	badStatus.Status = corev1.ReplicationControllerStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 2}
	negStatus := old.DeepCopy()
	negStatus.Status = corev1.ReplicationControllerStatus{Replicas: -1}
	renamed := old.DeepCopy()
	renamed.Name = "other"
	runUpdateCases(t, []updateCase{
		{name: "selector may change", old: old, obj: reselected},
		{name: "selector must still match", old: old, obj: mismatched, errors: []want{inv("spec.template.metadata.labels")}},
		{name: "name immutable", old: old, obj: renamed, errors: []want{immutable("metadata.name")}},
		{name: "status availableReplicas", status: true, old: old, obj: badStatus, errors: []want{
			invd("status.availableReplicas", "cannot be greater than status.replicas"),
			invd("status.availableReplicas", "cannot be greater than readyReplicas")}},
		{name: "status negative", status: true, old: old, obj: negStatus, errors: []want{inv("status.replicas"),
			// As upstream, the other counts (0) are then also greater than status.replicas.
			inv("status.fullyLabeledReplicas"), inv("status.readyReplicas"), inv("status.availableReplicas")}},
	})
}
