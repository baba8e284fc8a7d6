package deployment

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// TestSetNewReplicaSetAnnotations follows upstream's TestAnnotationUtils: each
// raise of the revision pushes the previous one into a bounded history.
func TestSetNewReplicaSetAnnotations(t *testing.T) {
	d := newDeployment("nginx", 1, nil, nil, nil, map[string]string{"name": "nginx"})
	d.Annotations[revisionAnnotation] = "1"
	d.Annotations["kubernetes.io/change-cause"] = "rolled"
	d.Annotations[corev1.LastAppliedConfigAnnotation] = "{}"
	r := newReplicaSet(d, "nginx-1", 1)
	for i := 10; i < 20; i++ {
		next := fmt.Sprint(i + 1)
		setNewReplicaSetAnnotations(discardLog(), d, r, next, true, 5)
		if i >= 12 {
			if want := fmt.Sprintf("%d,%d", i-1, i); r.Annotations[revisionHistoryAnnotation] != want {
				t.Errorf("history = %q, want %q", r.Annotations[revisionHistoryAnnotation], want)
			}
		}
		if r.Annotations[revisionAnnotation] != next {
			t.Errorf("revision = %q, want %q", r.Annotations[revisionAnnotation], next)
		}
	}
	if r.Annotations["kubernetes.io/change-cause"] != "rolled" {
		t.Errorf("change-cause not copied: %v", r.Annotations)
	}
	if _, ok := r.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		t.Errorf("last-applied-configuration copied: %v", r.Annotations)
	}
	// A lower revision never lowers the ReplicaSet's.
	if changed := setNewReplicaSetAnnotations(discardLog(), d, r, "3", true, 5); changed || r.Annotations[revisionAnnotation] != "20" {
		t.Errorf("changed %v, revision %q; want unchanged 20", changed, r.Annotations[revisionAnnotation])
	}
	// A ReplicaSet about to be created gets the replica annotations.
	fresh := newReplicaSet(d, "nginx-2", 0)
	setNewReplicaSetAnnotations(discardLog(), d, fresh, "21", false, 5)
	if fresh.Annotations[desiredReplicasAnnotation] != "1" || fresh.Annotations[maxReplicasAnnotation] != "1" || fresh.Annotations[revisionHistoryAnnotation] != "" {
		t.Errorf("new replica set annotations = %v", fresh.Annotations)
	}
}

func TestReplicasAnnotations(t *testing.T) {
	r := rs("r", 1, nil, metav1.Time{})
	if !replicasAnnotationsNeedUpdate(r, 10, 20) {
		t.Error("nil annotations need an update")
	}
	if !setReplicasAnnotations(r, 10, 20) || setReplicasAnnotations(r, 10, 20) {
		t.Error("setReplicasAnnotations should report exactly one change")
	}
	if replicasAnnotationsNeedUpdate(r, 10, 20) || !replicasAnnotationsNeedUpdate(r, 8, 20) || !replicasAnnotationsNeedUpdate(r, 10, 16) {
		t.Error("replicasAnnotationsNeedUpdate is wrong")
	}
	d := newDeployment("d", 1, nil, nil, nil, nil)
	r.Annotations[desiredReplicasAnnotation] = "1"
	r.Status.AvailableReplicas = 1
	if !isSaturated(d, r) {
		t.Error("a full, available ReplicaSet of the current size is saturated")
	}
}

func TestMaxRevision(t *testing.T) {
	withRev := func(rev string) *appsv1.ReplicaSet {
		r := rs("r"+rev, 0, nil, metav1.Time{})
		r.Annotations = map[string]string{revisionAnnotation: rev}
		return r
	}
	got := maxRevision(discardLog(), []*appsv1.ReplicaSet{withRev("3"), withRev("bad"), withRev("12"), rs("none", 0, nil, metav1.Time{})})
	if got != 12 {
		t.Errorf("maxRevision = %d, want 12", got)
	}
}

// The hash is upstream's ComputeHash: stable, changed by the collision count,
// and spelled in the safe alphabet.
func TestComputeHash(t *testing.T) {
	tpl := newDeployment("web", 1, nil, nil, nil, map[string]string{"app": "web"}).Spec.Template
	h := computeHash(&tpl, nil)
	if h != computeHash(tpl.DeepCopy(), nil) {
		t.Error("hash is not stable")
	}
	if !regexp.MustCompile(`^[bcdfghjklmnpqrstvwxz2456789]{1,10}$`).MatchString(h) {
		t.Errorf("hash %q is not in the safe alphabet", h)
	}
	if computeHash(&tpl, ptr.To[int32](1)) == h || computeHash(&tpl, ptr.To[int32](1)) == computeHash(&tpl, ptr.To[int32](2)) {
		t.Error("the collision count does not change the hash")
	}
	other := tpl.DeepCopy()
	other.Spec.Containers[0].Image = "foo/bar:v2"
	if computeHash(other, nil) == h {
		t.Error("another template gives the same hash")
	}
	// A golden value: a change of the hashing would rename every ReplicaSet.
	if h != "cc5c9574c" {
		t.Errorf("hash = %q, want the golden cc5c9574c", h)
	}
}

// TestReplicaSetName is upstream's generateReplicaSetName table.
func TestReplicaSetName(t *testing.T) {
	tests := []struct{ deployment, hash, want string }{
		{"my-deployment", "abcde12345", "my-deployment-abcde12345"},
		{strings.Repeat("a", 242), "abcde12345", strings.Repeat("a", 242) + "-abcde12345"},
		{strings.Repeat("b", 250), "abcde12345", strings.Repeat("b", 242) + "-abcde12345"},
		{strings.Repeat("d", 252), strings.Repeat("h", 252), strings.Repeat("d", 252) + "-" + strings.Repeat("h", 252)},
	}
	for _, test := range tests {
		got := replicaSetName(test.deployment, test.hash)
		if got != test.want {
			t.Errorf("replicaSetName(%d chars, %q) = %d chars", len(test.deployment), test.hash, len(got))
		}
		if len(test.hash) < 20 && len(got) > validation.DNS1123SubdomainMaxLength {
			t.Errorf("name of %d chars is too long", len(got))
		}
	}
}

func TestSetCondition(t *testing.T) {
	now := metav1.NewTime(testNow)
	earlier := metav1.NewTime(testNow.Add(-3600e9))
	status := appsv1.DeploymentStatus{}
	setCondition(&status, appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: "True", Reason: "A", LastTransitionTime: earlier, LastUpdateTime: earlier})
	setCondition(&status, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: "True", Reason: "P", LastTransitionTime: earlier, LastUpdateTime: earlier})
	// Same status and reason: nothing changes.
	setCondition(&status, appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: "True", Reason: "A", Message: "new", LastTransitionTime: now, LastUpdateTime: now})
	if c := getCondition(status, appsv1.DeploymentAvailable); c.Message != "" || !c.LastUpdateTime.Equal(&earlier) {
		t.Errorf("condition changed: %+v", c)
	}
	// Same status, another reason: replaced (moved last), transition time kept.
	setCondition(&status, appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: "True", Reason: "B", LastTransitionTime: now, LastUpdateTime: now})
	if c := status.Conditions[1]; c.Type != appsv1.DeploymentAvailable || c.Reason != "B" || !c.LastTransitionTime.Equal(&earlier) || !c.LastUpdateTime.Equal(&now) {
		t.Errorf("conditions = %+v", status.Conditions)
	}
	// Another status: the transition time moves.
	setCondition(&status, appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: "False", Reason: "B", LastTransitionTime: now, LastUpdateTime: now})
	if c := getCondition(status, appsv1.DeploymentAvailable); !c.LastTransitionTime.Equal(&now) {
		t.Errorf("transition time not moved: %+v", c)
	}
	removeCondition(&status, appsv1.DeploymentAvailable)
	if len(status.Conditions) != 1 || getCondition(status, appsv1.DeploymentAvailable) != nil {
		t.Errorf("conditions after remove = %+v", status.Conditions)
	}
}
