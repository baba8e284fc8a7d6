package statefulset

import (
	"regexp"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/controller/history"
	"github.com/kubette/kubette/internal/controller/ownerref"
	"github.com/kubette/kubette/internal/controller/podstate"
)

// ordinalName matches a StatefulSet pod's name: the set's name, a dash, the ordinal.
var ordinalName = regexp.MustCompile("^(.*)-([0-9]+)$")

// parentAndOrdinal returns the set name and ordinal of a pod's name (ordinal -1 when
// the name has none).
func parentAndOrdinal(pod *corev1.Pod) (string, int) {
	m := ordinalName.FindStringSubmatch(pod.Name)
	if len(m) != 3 {
		return "", -1
	}
	n, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return "", -1
	}
	return m[1], int(n)
}

func ordinalOf(pod *corev1.Pod) int {
	_, ord := parentAndOrdinal(pod)
	return ord
}

// isMember reports whether the pod is named as one of the set's.
func isMember(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	parent, _ := parentAndOrdinal(pod)
	return parent == set.Name
}

func startOrdinal(set *appsv1.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

func replicas(set *appsv1.StatefulSet) int {
	if set.Spec.Replicas == nil {
		return 1
	}
	return int(*set.Spec.Replicas)
}

// inRange reports whether an ordinal is one of the set's current replicas.
func inRange(set *appsv1.StatefulSet, ord int) bool {
	return ord >= startOrdinal(set) && ord < startOrdinal(set)+replicas(set)
}

func podName(set *appsv1.StatefulSet, ord int) string { return set.Name + "-" + strconv.Itoa(ord) }

// claimName is the name of the claim of template for the pod of ordinal ord.
func claimName(set *appsv1.StatefulSet, claim *corev1.PersistentVolumeClaim, ord int) string {
	return claim.Name + "-" + podName(set, ord)
}

// identityMatches reports whether the pod has the name, namespace and identity labels
// of ordinal ord.
func identityMatches(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	parent, ord := parentAndOrdinal(pod)
	return ord >= 0 && parent == set.Name && pod.Namespace == set.Namespace &&
		pod.Labels[appsv1.StatefulSetPodNameLabel] == pod.Name &&
		pod.Labels[appsv1.PodIndexLabel] == strconv.Itoa(ord)
}

// setIdentityLabels puts the pod-name and pod-index labels on the pod.
func setIdentityLabels(pod *corev1.Pod, ord int) {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
	pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(ord)
}

// newPod returns the pod of ordinal ord from the set's template (that of revision
// rev): its stable name, hostname and subdomain (the governing Service), identity and
// revision labels, and one volume per claim template naming the ordinal's claim.
func newPod(set *appsv1.StatefulSet, template *corev1.PodTemplateSpec, rev string, ord int) *corev1.Pod {
	t := template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            podName(set, ord),
			Namespace:       set.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*ownerref.NewControllerRef(set, controllerKind)},
		},
		Spec: t.Spec,
	}
	setIdentityLabels(pod, ord)
	pod.Labels[history.HashLabel] = rev
	pod.Spec.Hostname = pod.Name
	pod.Spec.Subdomain = set.Spec.ServiceName
	for i := range set.Spec.VolumeClaimTemplates {
		claim := &set.Spec.VolumeClaimTemplates[i]
		vol := corev1.Volume{Name: claim.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(set, claim, ord)},
		}}
		replaced := false
		for j := range pod.Spec.Volumes {
			if pod.Spec.Volumes[j].Name == claim.Name {
				pod.Spec.Volumes[j] = vol
				replaced = true
			}
		}
		if !replaced {
			pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
		}
	}
	return pod
}

// revisionOf is the name of the revision a pod was made from.
func revisionOf(pod *corev1.Pod) string { return pod.Labels[history.HashLabel] }

func isCreated(pod *corev1.Pod) bool { return pod.Status.Phase != "" }

func isFailed(pod *corev1.Pod) bool { return pod.Status.Phase == corev1.PodFailed }

func isSucceeded(pod *corev1.Pod) bool { return pod.Status.Phase == corev1.PodSucceeded }

func isTerminating(pod *corev1.Pod) bool { return pod.DeletionTimestamp != nil }

func isRunningAndReady(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && podstate.IsPodReady(pod)
}

func isRunningAndAvailable(pod *corev1.Pod, minReadySeconds int32, now metav1.Time) bool {
	return pod.Status.Phase == corev1.PodRunning && podstate.IsPodAvailable(pod, minReadySeconds, now)
}

// isHealthy reports whether a pod runs, is ready and is not being deleted.
func isHealthy(pod *corev1.Pod) bool { return isRunningAndReady(pod) && !isTerminating(pod) }
