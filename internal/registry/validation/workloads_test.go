package validation

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func validDaemonSet(mutate ...func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	ds := defaulted(&appsv1.DaemonSet{
		ObjectMeta: objectMeta("agent"),
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: validTemplate(),
		},
	})
	for _, m := range mutate {
		m(ds)
	}
	return ds
}

func validStatefulSet(mutate ...func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	ss := defaulted(&appsv1.StatefulSet{
		ObjectMeta: objectMeta("db"),
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: validTemplate(),
		},
	})
	for _, m := range mutate {
		m(ss)
	}
	return ss
}

func TestValidateDaemonSet(t *testing.T) {
	ru := "spec.updateStrategy.rollingUpdate"
	runCreateCases(t, []createCase{
		{name: "valid", obj: validDaemonSet()},
		{name: "valid surge", obj: validDaemonSet(func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: intstrPtr(intstr.FromInt32(0)), MaxSurge: intstrPtr(intstr.FromString("10%"))}
		})},
		{name: "both non-zero", obj: validDaemonSet(func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = intstrPtr(intstr.FromInt32(1))
		}), errors: []want{invd(ru+".maxSurge", "may not be set when maxUnavailable is non-zero")}},
		{name: "both zero", obj: validDaemonSet(func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intstrPtr(intstr.FromInt32(0))
		}), errors: []want{req(ru + ".maxUnavailable")}},
		{name: "over 100%", obj: validDaemonSet(func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intstrPtr(intstr.FromString("120%"))
		}), errors: []want{invd(ru+".maxUnavailable", "must not be greater than 100%")}},
		{name: "strategy unsupported", obj: validDaemonSet(func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.Type = "Blue" }),
			errors: []want{unsup("spec.updateStrategy")}},
		{name: "empty selector", obj: validDaemonSet(func(ds *appsv1.DaemonSet) { ds.Spec.Selector = &metav1.LabelSelector{} }),
			errors: []want{invd("spec.selector", "empty selector is invalid for daemonset")}},
		{name: "activeDeadlineSeconds", obj: validDaemonSet(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.ActiveDeadlineSeconds = ptr(int64(1)) }),
			errors: []want{forbd("spec.template.spec.activeDeadlineSeconds", "activeDeadlineSeconds in DaemonSet is not Supported")}},
	})
	old := validDaemonSet(func(ds *appsv1.DaemonSet) { ds.ResourceVersion = "1" })
	runUpdateCases(t, []updateCase{
		{name: "selector immutable", old: old, obj: validDaemonSet(func(ds *appsv1.DaemonSet) {
			ds.ResourceVersion = "1"
			ds.Spec.Selector.MatchLabels["tier"] = "x"
			ds.Spec.Template.Labels["tier"] = "x"
		}), errors: []want{immutable("spec.selector")}},
		{name: "status negative", old: old, status: true, obj: validDaemonSet(func(ds *appsv1.DaemonSet) {
			ds.ResourceVersion = "1"
			ds.Status.NumberReady = -1
		}), errors: []want{inv("status.numberReady")}},
	})
}

func TestValidateStatefulSet(t *testing.T) {
	claim := corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	runCreateCases(t, []createCase{
		{name: "valid", obj: validStatefulSet()},
		{name: "valid with claims", obj: validStatefulSet(func(ss *appsv1.StatefulSet) { ss.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{claim} })},
		{name: "claim without access mode and size", obj: validStatefulSet(func(ss *appsv1.StatefulSet) {
			ss.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
		}), errors: []want{req("spec.volumeClaimTemplates[0].spec.accessModes"), req("spec.volumeClaimTemplates[0].spec.resources[storage]")}},
		{name: "pod management", obj: validStatefulSet(func(ss *appsv1.StatefulSet) { ss.Spec.PodManagementPolicy = "Random" }),
			errors: []want{invd("spec.podManagementPolicy", "must be 'OrderedReady' or 'Parallel'")}},
		{name: "OnDelete with rollingUpdate", obj: validStatefulSet(func(ss *appsv1.StatefulSet) { ss.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType }),
			errors: []want{invd("spec.updateStrategy.rollingUpdate", "only allowed for updateStrategy 'RollingUpdate'")}},
		{name: "negative partition", obj: validStatefulSet(func(ss *appsv1.StatefulSet) { ss.Spec.UpdateStrategy.RollingUpdate.Partition = ptr(int32(-1)) }),
			errors: []want{inv("spec.updateStrategy.rollingUpdate.partition")}},
		{name: "zero maxUnavailable", obj: validStatefulSet(func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intstrPtr(intstr.FromInt32(0))
		}), errors: []want{inv("spec.updateStrategy.rollingUpdate.maxUnavailable")}},
		{name: "retention policy", obj: validStatefulSet(func(ss *appsv1.StatefulSet) { ss.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = "Keep" }),
			errors: []want{unsup("spec.persistentVolumeClaimRetentionPolicy.whenScaled")}},
		{name: "selector does not match", obj: validStatefulSet(func(ss *appsv1.StatefulSet) { ss.Spec.Selector.MatchLabels["app"] = "db" }),
			errors: []want{invd("spec.template.metadata.labels", "`selector` does not match template `labels`")}},
	})
	old := validStatefulSet(func(ss *appsv1.StatefulSet) { ss.ResourceVersion = "1" })
	runUpdateCases(t, []updateCase{
		{name: "replicas and template may change", old: old, obj: validStatefulSet(func(ss *appsv1.StatefulSet) {
			ss.ResourceVersion = "1"
			ss.Spec.Replicas = ptr(int32(5))
			ss.Spec.Template.Spec.Containers[0].Image = "other"
		})},
		{name: "serviceName may not", old: old, obj: validStatefulSet(func(ss *appsv1.StatefulSet) {
			ss.ResourceVersion = "1"
			ss.Spec.ServiceName = "other"
		}), errors: []want{forb("spec")}},
		{name: "status above replicas", old: old, status: true, obj: validStatefulSet(func(ss *appsv1.StatefulSet) {
			ss.ResourceVersion = "1"
			ss.Status.Replicas, ss.Status.ReadyReplicas = 1, 2
		}), errors: []want{invd("status.readyReplicas", "cannot be greater than status.replicas")}},
	})
}

func TestValidateControllerRevision(t *testing.T) {
	rev := func(data string) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: objectMeta("agent-1"), Data: runtime.RawExtension{Raw: []byte(data)}, Revision: 1}
	}
	runCreateCases(t, []createCase{
		{name: "valid", obj: rev(`{"spec":{}}`)},
		{name: "data required", obj: rev(""), errors: []want{req("data")}},
		{name: "negative revision", obj: func() runtime.Object { r := rev(`{}`); r.Revision = -1; return r }(), errors: []want{inv("revision")}},
	})
	old := rev(`{"a":1}`)
	old.ResourceVersion = "1"
	changed := rev(`{"a":2}`)
	changed.ResourceVersion = "1"
	same := rev(`{ "a": 1 }`)
	same.ResourceVersion, same.Revision = "1", 3
	runUpdateCases(t, []updateCase{
		{name: "data immutable", old: old, obj: changed, errors: []want{immutable("data")}},
		{name: "revision may change", old: old, obj: same},
	})
}
