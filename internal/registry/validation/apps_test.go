package validation

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func deploymentWith(mutate func(d *appsv1.Deployment)) *appsv1.Deployment {
	d := validDeployment()
	mutate(d)
	return d
}

func intstrPtr(v intstr.IntOrString) *intstr.IntOrString { return &v }

func TestValidateDeploymentCreate(t *testing.T) {
	tmpl := "spec.template"
	runCreateCases(t, []createCase{
		{name: "valid", obj: validDeployment()},
		{name: "valid Recreate", obj: deploymentWith(func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		})},
		{name: "valid zero replicas", obj: deploymentWith(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(0)) })},
		{name: "name invalid", obj: deploymentWith(func(d *appsv1.Deployment) { d.Name = "Web" }), errors: []want{inv("metadata.name")}},
		// As upstream, a nil selector (labels.Nothing) also matches no template labels.
		{name: "selector required", obj: deploymentWith(func(d *appsv1.Deployment) { d.Spec.Selector = nil }),
			errors: []want{req("spec.selector"), inv(tmpl + ".metadata.labels")}},
		{name: "selector empty", obj: deploymentWith(func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} }),
			errors: []want{invd("spec.selector", "empty selector is invalid for deployment")}},
		{name: "selector does not match template", obj: deploymentWith(func(d *appsv1.Deployment) {
			d.Spec.Selector.MatchLabels = map[string]string{"app": "api"}
		}), errors: []want{invd(tmpl+".metadata.labels", "`selector` does not match template `labels`")}},
		{name: "selector with bad operator", obj: deploymentWith(func(d *appsv1.Deployment) {
			d.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Maybe"}}
		}), errors: []want{inv("spec.selector.matchExpressions[0].operator"), inv("spec.selector")}},
		{name: "negative replicas", obj: deploymentWith(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(-1)) }),
			errors: []want{invd("spec.replicas", "must be greater than or equal to 0")}},
		{name: "template restartPolicy must be Always", obj: deploymentWith(func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure }),
			errors: []want{unsup(tmpl + ".spec.restartPolicy")}},
		{name: "template activeDeadlineSeconds", obj: deploymentWith(func(d *appsv1.Deployment) { d.Spec.Template.Spec.ActiveDeadlineSeconds = ptr(int64(10)) }),
			errors: []want{forb(tmpl + ".spec.activeDeadlineSeconds")}},
		{name: "template container image", obj: deploymentWith(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "" }),
			errors: []want{req(tmpl + ".spec.containers[0].image")}},
		{name: "template label invalid", obj: deploymentWith(func(d *appsv1.Deployment) { d.Spec.Template.Labels["bad key!"] = "x" }),
			errors: []want{inv(tmpl + ".labels")}},
		{name: "strategy type unsupported", obj: deploymentWith(func(d *appsv1.Deployment) { d.Spec.Strategy.Type = "BlueGreen" }),
			errors: []want{unsup("spec.strategy")}},
		{name: "Recreate with rollingUpdate", obj: deploymentWith(func(d *appsv1.Deployment) { d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType }),
			errors: []want{forbd("spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'")}},
		{name: "maxSurge and maxUnavailable both 0", obj: deploymentWith(func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: intstrPtr(intstr.FromInt32(0)), MaxUnavailable: intstrPtr(intstr.FromString("0%"))}
		}), errors: []want{invd("spec.strategy.rollingUpdate.maxUnavailable", "may not be 0 when `maxSurge` is 0")}},
		{name: "invalid percentage", obj: deploymentWith(func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxSurge = intstrPtr(intstr.FromString("25"))
		}), errors: []want{inv("spec.strategy.rollingUpdate.maxSurge")}},
		{name: "maxUnavailable over 100%", obj: deploymentWith(func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = intstrPtr(intstr.FromString("150%"))
		}), errors: []want{invd("spec.strategy.rollingUpdate.maxUnavailable", "must not be greater than 100%")}},
		{name: "negative maxSurge", obj: deploymentWith(func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxSurge = intstrPtr(intstr.FromInt32(-1))
		}), errors: []want{inv("spec.strategy.rollingUpdate.maxSurge")}},
		{name: "negative revisionHistoryLimit", obj: deploymentWith(func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptr(int32(-1)) }),
			errors: []want{inv("spec.revisionHistoryLimit")}},
		{name: "progressDeadlineSeconds not above minReadySeconds", obj: deploymentWith(func(d *appsv1.Deployment) {
			d.Spec.MinReadySeconds = 600
		}), errors: []want{invd("spec.progressDeadlineSeconds", "must be greater than minReadySeconds")}},
		{name: "negative minReadySeconds", obj: deploymentWith(func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = -1 }),
			errors: []want{inv("spec.minReadySeconds")}},
	})
}

func TestValidateDeploymentUpdate(t *testing.T) {
	old := stored(validDeployment())
	upd := func(mutate func(d *appsv1.Deployment)) *appsv1.Deployment {
		d := old.DeepCopy()
		mutate(d)
		return d
	}
	runUpdateCases(t, []updateCase{
		{name: "scale and new image", old: old, obj: upd(func(d *appsv1.Deployment) {
			d.Spec.Replicas = ptr(int32(5))
			d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
		})},
		{name: "selector is immutable", old: old, obj: upd(func(d *appsv1.Deployment) {
			d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "v": "2"}}
			d.Spec.Template.Labels = map[string]string{"app": "web", "v": "2"}
		}), errors: []want{immutable("spec.selector")}},
		{name: "template labels must keep matching", old: old, obj: upd(func(d *appsv1.Deployment) {
			d.Spec.Template.Labels = map[string]string{"app": "other"}
		}), errors: []want{inv("spec.template.metadata.labels")}},
		{name: "resourceVersion kept, name immutable", old: old, obj: upd(func(d *appsv1.Deployment) { d.Name = "web2" }), errors: []want{immutable("metadata.name")}},
	})
}

func TestDeploymentSelectorImmutableMessage(t *testing.T) {
	old := stored(validDeployment())
	d := old.DeepCopy()
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web2"}}
	d.Spec.Template.Labels = map[string]string{"app": "web2"}
	errs := ValidateUpdate(d, old)
	want := `spec.selector: Invalid value: {"matchLabels":{"app":"web2"}}: field is immutable`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("errors = %v, want %q", errs, want)
	}
}

func TestValidateDeploymentStatusUpdate(t *testing.T) {
	old := stored(validDeployment())
	old.Status = appsv1.DeploymentStatus{Replicas: 1, CollisionCount: ptr(int32(2))}
	st := func(mutate func(d *appsv1.Deployment)) *appsv1.Deployment {
		d := old.DeepCopy()
		mutate(d)
		return d
	}
	runUpdateCases(t, []updateCase{
		{name: "valid", status: true, old: old, obj: st(func(d *appsv1.Deployment) {
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 2, CollisionCount: ptr(int32(2))}
		})},
		{name: "ready above replicas", status: true, old: old, obj: st(func(d *appsv1.Deployment) { d.Status.ReadyReplicas = 2 }),
			errors: []want{invd("status.readyReplicas", "cannot be greater than status.replicas")}},
		{name: "available above ready", status: true, old: old, obj: st(func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 1 }),
			errors: []want{invd("status.availableReplicas", "cannot be greater than readyReplicas")}},
		{name: "collisionCount decremented", status: true, old: old, obj: st(func(d *appsv1.Deployment) { d.Status.CollisionCount = ptr(int32(1)) }),
			errors: []want{invd("status.collisionCount", "cannot be decremented")}},
		{name: "negative replicas", status: true, old: old, obj: st(func(d *appsv1.Deployment) { d.Status.Replicas = -1 }),
			errors: []want{invd("status.replicas", "must be greater than or equal to 0"), inv("status.updatedReplicas"), inv("status.readyReplicas"), inv("status.availableReplicas")}},
	})
}

func TestValidateReplicaSet(t *testing.T) {
	rsWith := func(mutate func(rs *appsv1.ReplicaSet)) *appsv1.ReplicaSet {
		rs := validReplicaSet()
		mutate(rs)
		return rs
	}
	runCreateCases(t, []createCase{
		{name: "valid", obj: validReplicaSet()},
		{name: "selector required", obj: rsWith(func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = nil }), errors: []want{req("spec.selector"), inv("spec.template.metadata.labels")}},
		{name: "selector mismatch", obj: rsWith(func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Labels = nil }),
			errors: []want{invd("spec.template.metadata.labels", "`selector` does not match template `labels`")}},
		{name: "negative replicas", obj: rsWith(func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptr(int32(-3)) }), errors: []want{inv("spec.replicas")}},
		{name: "restartPolicy Never", obj: rsWith(func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever }),
			errors: []want{unsup("spec.template.spec.restartPolicy")}},
	})
	old := stored(validReplicaSet())
	changed := old.DeepCopy()
	changed.Spec.Selector.MatchLabels["tier"] = "fe"
	changed.Spec.Template.Labels["tier"] = "fe"
	scaled := old.DeepCopy()
	scaled.Spec.Replicas = ptr(int32(4))
	badStatus := old.DeepCopy()
	badStatus.Status = appsv1.ReplicaSetStatus{Replicas: 1, FullyLabeledReplicas: 2}
	runUpdateCases(t, []updateCase{
		{name: "scale", old: old, obj: scaled},
		{name: "selector immutable", old: old, obj: changed, errors: []want{immutable("spec.selector")}},
		{name: "status fullyLabeledReplicas", status: true, old: old, obj: badStatus, errors: []want{invd("status.fullyLabeledReplicas", "cannot be greater than status.replicas")}},
	})
}

func TestValidateScale(t *testing.T) {
	scale := &autoscalingv1.Scale{ObjectMeta: objectMeta("web"), Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
	negative := scale.DeepCopy()
	negative.Spec.Replicas = -1
	runCreateCases(t, []createCase{
		{name: "valid", obj: scale},
		{name: "negative replicas", obj: negative, errors: []want{invd("spec.replicas", "must be greater than or equal to 0")}},
	})
	runUpdateCases(t, []updateCase{
		{name: "update negative", old: scale, obj: negative, errors: []want{inv("spec.replicas")}},
		{name: "update valid", old: scale, obj: scale.DeepCopy()},
	})
}
