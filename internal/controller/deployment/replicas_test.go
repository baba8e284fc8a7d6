package deployment

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestResolveFenceposts is upstream's table.
func TestResolveFenceposts(t *testing.T) {
	tests := []struct {
		maxSurge, maxUnavailable       *string
		desired                        int32
		expectSurge, expectUnavailable int32
		expectError                    bool
	}{
		{ptr.To("0%"), ptr.To("0%"), 0, 0, 1, false},
		{ptr.To("39%"), ptr.To("39%"), 10, 4, 3, false},
		{ptr.To("oops"), ptr.To("39%"), 10, 0, 0, true},
		{ptr.To("55%"), ptr.To("urg"), 10, 0, 0, true},
		{nil, ptr.To("39%"), 10, 0, 3, false},
		{ptr.To("39%"), nil, 10, 4, 0, false},
		{nil, nil, 10, 0, 1, false},
	}
	for i, test := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var surge, unavailable *intstr.IntOrString
			if test.maxSurge != nil {
				surge = ptr.To(intstr.FromString(*test.maxSurge))
			}
			if test.maxUnavailable != nil {
				unavailable = ptr.To(intstr.FromString(*test.maxUnavailable))
			}
			s, u, err := resolveFenceposts(surge, unavailable, test.desired)
			if (err != nil) != test.expectError {
				t.Errorf("error = %v, want one: %v", err, test.expectError)
			}
			if s != test.expectSurge || u != test.expectUnavailable {
				t.Errorf("got %d:%d, want %d:%d", s, u, test.expectSurge, test.expectUnavailable)
			}
		})
	}
}

// TestMaxUnavailable is upstream's table.
func TestMaxUnavailable(t *testing.T) {
	deployment := func(replicas int32, maxUnavailable intstr.IntOrString) *appsv1.Deployment {
		return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: &maxUnavailable},
			},
		}}
	}
	tests := []struct {
		name     string
		d        *appsv1.Deployment
		expected int32
	}{
		{"less than replicas", deployment(10, intstr.FromInt32(5)), 5},
		{"equal to replicas", deployment(10, intstr.FromInt32(10)), 10},
		{"greater than replicas", deployment(5, intstr.FromInt32(10)), 5},
		{"replicas is 0", deployment(0, intstr.FromInt32(10)), 0},
		{"Recreate", &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}}}, 0},
		{"percent less than replicas", deployment(10, intstr.FromString("50%")), 5},
		{"percent equal to replicas", deployment(10, intstr.FromString("100%")), 10},
		{"percent greater than replicas", deployment(5, intstr.FromString("100%")), 5},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			if got := maxUnavailable(test.d); got != test.expected {
				t.Errorf("maxUnavailable = %d, want %d", got, test.expected)
			}
		})
	}
	if got := minAvailable(deployment(10, intstr.FromString("60%"))); got != 4 {
		t.Errorf("minAvailable = %d, want 4", got)
	}
}

// TestNewRSNewReplicas is upstream's table.
func TestNewRSNewReplicas(t *testing.T) {
	tests := []struct {
		name                                   string
		strategy                               appsv1.DeploymentStrategyType
		depReplicas, newRSReplicas, surge, exp int32
	}{
		{"can not scale up - to newRSReplicas", appsv1.RollingUpdateDeploymentStrategyType, 1, 5, 1, 5},
		{"scale up - to depReplicas", appsv1.RollingUpdateDeploymentStrategyType, 6, 2, 10, 6},
		{"recreate - to depReplicas", appsv1.RecreateDeploymentStrategyType, 3, 1, 1, 3},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			d := newDeployment("nginx", test.depReplicas, nil, ptr.To(intstr.FromInt32(test.surge)), ptr.To(intstr.FromInt32(1)), nil)
			d.Spec.Strategy.Type = test.strategy
			newRS := rs("new", test.newRSReplicas, nil, metav1.Time{})
			rs5 := rs("rs5", 5, nil, metav1.Time{})
			got, err := newRSNewReplicas(d, []*appsv1.ReplicaSet{rs5}, newRS)
			if err != nil || got != test.exp {
				t.Errorf("newRSNewReplicas = %d, %v; want %d", got, err, test.exp)
			}
		})
	}
}

// TestReplicaSetFraction is upstream's getReplicaSetFraction table.
func TestReplicaSetFraction(t *testing.T) {
	tests := []struct {
		name                               string
		deploymentReplicas, statusReplicas int32
		maxSurge                           int32
		rsReplicas                         int32
		annotations                        map[string]string
		expected                           int32
	}{
		{name: "empty deployment always scales to 0", deploymentReplicas: 0, rsReplicas: 10, expected: -10},
		{name: "unsynced deployment does not scale when max-replicas is missing", deploymentReplicas: 10, rsReplicas: 5, expected: 0},
		{name: "unsynced deployment does not scale when max-replicas is 0", deploymentReplicas: 10, rsReplicas: 5, annotations: map[string]string{maxReplicasAnnotation: "0"}, expected: 0},
		{name: "scale up by 1/5, max-replicas missing", deploymentReplicas: 120, statusReplicas: 100, rsReplicas: 50, expected: 10},
		{name: "scale up by 1/5, max-replicas 0", deploymentReplicas: 120, statusReplicas: 100, rsReplicas: 50, annotations: map[string]string{maxReplicasAnnotation: "0"}, expected: 10},
		{name: "scale up by 1/5", deploymentReplicas: 120, rsReplicas: 50, annotations: map[string]string{maxReplicasAnnotation: "100"}, expected: 10},
		{name: "scale up with maxSurge by 1/5", deploymentReplicas: 120, maxSurge: 10, rsReplicas: 50, annotations: map[string]string{maxReplicasAnnotation: "110"}, expected: 9},
		{name: "scale down by 1/6", deploymentReplicas: 10, rsReplicas: 6, annotations: map[string]string{maxReplicasAnnotation: "12"}, expected: -1},
		{name: "scale down with maxSurge by 1/6", deploymentReplicas: 100, maxSurge: 10, rsReplicas: 50, annotations: map[string]string{maxReplicasAnnotation: "130"}, expected: -8},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			d := newDeployment("nginx", test.deploymentReplicas, nil, ptr.To(intstr.FromInt32(test.maxSurge)), ptr.To(intstr.FromInt32(1)), nil)
			d.Status.Replicas = test.statusReplicas
			r := rs("nginx-1", test.rsReplicas, nil, metav1.Time{})
			r.Annotations = test.annotations
			if got := replicaSetFraction(discardLog(), r, d); got != test.expected {
				t.Errorf("fraction = %d, want %d", got, test.expected)
			}
		})
	}
}

// TestReplicaCounts follows upstream's TestGetReplicaCountForReplicaSets.
func TestReplicaCounts(t *testing.T) {
	rs1 := rs("rs1", 1, nil, metav1.Time{})
	rs1.Status = appsv1.ReplicaSetStatus{ObservedGeneration: 1, Replicas: 2, TerminatingReplicas: ptr.To[int32](3)}
	rs2 := rs("rs2", 2, nil, metav1.Time{})
	rs2.Status = appsv1.ReplicaSetStatus{Replicas: 3, TerminatingReplicas: ptr.To[int32](1)}
	rs3 := rs("unsynced", 3, nil, metav1.Time{}) // never synced: no terminating count, none assumed
	rs4 := rs("dropped", 1, nil, metav1.Time{})  // synced, but no count: unknown
	rs4.Status = appsv1.ReplicaSetStatus{ObservedGeneration: 1, Replicas: 1}
	tests := []struct {
		sets          []*appsv1.ReplicaSet
		count, actual int32
		terminating   *int32
	}{
		{[]*appsv1.ReplicaSet{rs1}, 1, 2, ptr.To[int32](3)},
		{[]*appsv1.ReplicaSet{rs1, rs2}, 3, 5, ptr.To[int32](4)},
		{[]*appsv1.ReplicaSet{rs3}, 3, 0, ptr.To[int32](0)},
		{[]*appsv1.ReplicaSet{rs1, rs2, rs3}, 6, 5, ptr.To[int32](4)},
		{[]*appsv1.ReplicaSet{rs4}, 1, 1, nil},
		{[]*appsv1.ReplicaSet{rs1, rs2, rs3, rs4, nil}, 7, 6, nil},
	}
	for i, test := range tests {
		if got := replicaCount(test.sets); got != test.count {
			t.Errorf("%d: count %d, want %d", i, got, test.count)
		}
		if got := actualReplicaCount(test.sets); got != test.actual {
			t.Errorf("%d: actual %d, want %d", i, got, test.actual)
		}
		if got := terminatingReplicaCount(test.sets); !ptr.Equal(got, test.terminating) {
			t.Errorf("%d: terminating %v, want %v", i, ptr.Deref(got, -1), ptr.Deref(test.terminating, -1))
		}
	}
}

func TestDeploymentCompleteAndProgressing(t *testing.T) {
	deployment := func(desired, current, updated, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			Spec:   appsv1.DeploymentSpec{Replicas: &desired},
			Status: appsv1.DeploymentStatus{Replicas: current, UpdatedReplicas: updated, AvailableReplicas: available},
		}
	}
	complete := []struct {
		d    *appsv1.Deployment
		want bool
	}{
		{deployment(5, 5, 5, 4), false},
		{deployment(5, 5, 5, 5), true},
		{deployment(5, 5, 4, 5), false},
		{deployment(1, 2, 1, 1), false},
		{deployment(1, 1, 1, 0), false},
	}
	for i, test := range complete {
		if got := deploymentComplete(test.d, &test.d.Status); got != test.want {
			t.Errorf("complete %d: %v, want %v", i, got, test.want)
		}
	}
	status := func(current, updated, ready, available int32) appsv1.DeploymentStatus {
		return appsv1.DeploymentStatus{Replicas: current, UpdatedReplicas: updated, ReadyReplicas: ready, AvailableReplicas: available}
	}
	progressing := []struct {
		old, new appsv1.DeploymentStatus
		want     bool
	}{
		{status(10, 4, 4, 4), status(10, 6, 4, 4), true},
		{status(10, 4, 4, 4), status(10, 4, 4, 4), false},
		{status(10, 4, 6, 6), status(8, 4, 6, 6), true},
		{status(10, 7, 3, 3), status(10, 6, 3, 3), false},
		{status(10, 4, 7, 7), status(8, 8, 5, 5), true},
		{status(10, 10, 9, 8), status(10, 10, 10, 8), true},
		{status(10, 10, 10, 9), status(10, 10, 10, 10), true},
	}
	for i, test := range progressing {
		d := &appsv1.Deployment{Status: test.old}
		if got := deploymentProgressing(d, &test.new); got != test.want {
			t.Errorf("progressing %d: %v, want %v", i, got, test.want)
		}
	}
}

func TestFindNewAndOldReplicaSets(t *testing.T) {
	now := metav1.Now()
	later := metav1.NewTime(now.Add(60e9))
	before := metav1.NewTime(now.Add(-60e9))
	d := newDeployment("nginx", 1, nil, nil, nil, map[string]string{"name": "nginx"})
	newRS := newReplicaSet(d, "new", 1)
	newRS.Labels = map[string]string{"name": "nginx", appsv1.DefaultDeploymentUniqueLabelKey: "hash"}
	newRS.Spec.Template.Labels = map[string]string{"name": "nginx", appsv1.DefaultDeploymentUniqueLabelKey: "hash"}
	newRS.CreationTimestamp = later
	dup := newReplicaSet(d, "dup", 0)
	dup.Spec.Template.Labels = map[string]string{"name": "nginx", appsv1.DefaultDeploymentUniqueLabelKey: "different-hash"}
	dup.CreationTimestamp = now
	oldRS := newReplicaSet(d, "old", 0)
	oldRS.Spec.Template.Spec.Containers[0].Name = "nginx-old-1"
	oldRS.CreationTimestamp = before

	if got := findNewReplicaSet(d, []*appsv1.ReplicaSet{newRS, oldRS}); got != newRS {
		t.Errorf("new = %v, want new", got)
	}
	if got := findNewReplicaSet(d, []*appsv1.ReplicaSet{newRS, oldRS, dup}); got != dup {
		t.Errorf("new = %v, want the oldest of the equal ones", got)
	}
	if got := findNewReplicaSet(d, []*appsv1.ReplicaSet{oldRS}); got != nil {
		t.Errorf("new = %v, want none", got)
	}
	withReplicas, all := findOldReplicaSets(d, []*appsv1.ReplicaSet{oldRS, newRS, dup})
	if !reflect.DeepEqual(all, []*appsv1.ReplicaSet{oldRS, newRS}) || !reflect.DeepEqual(withReplicas, []*appsv1.ReplicaSet{newRS}) {
		t.Errorf("old = %v, with replicas %v", names(all), names(withReplicas))
	}
}

func names(rss []*appsv1.ReplicaSet) []string {
	var out []string
	for _, r := range rss {
		out = append(out, r.Name)
	}
	return out
}

// TestEqualIgnoreHash is upstream's table.
func TestEqualIgnoreHash(t *testing.T) {
	tpl := func(name, node string, annotations, labels map[string]string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: labels}, Spec: corev1.PodSpec{NodeName: node}}
	}
	h := appsv1.DefaultDeploymentUniqueLabelKey
	tests := []struct {
		name           string
		former, latter corev1.PodTemplateSpec
		expected       bool
	}{
		{"same", tpl("foo", "n", map[string]string{}, map[string]string{h: "v1", "a": "b"}), tpl("foo", "n", map[string]string{}, map[string]string{h: "v1", "a": "b"}), true},
		{"only the hash differs", tpl("foo", "n", map[string]string{}, map[string]string{h: "v1", "a": "b"}), tpl("foo", "n", map[string]string{}, map[string]string{h: "v2", "a": "b"}), true},
		{"one has no hash", tpl("foo", "n", map[string]string{}, map[string]string{"a": "b"}), tpl("foo", "n", map[string]string{}, map[string]string{h: "v2", "a": "b"}), true},
		{"other labels, same count", tpl("foo", "n", map[string]string{}, map[string]string{"a": "b"}), tpl("foo", "n", map[string]string{}, map[string]string{h: "v2"}), false},
		{"other labels, same hash", tpl("foo", "n", map[string]string{}, map[string]string{h: "v1"}), tpl("foo", "n", map[string]string{}, map[string]string{h: "v1", "a": "b"}), false},
		{"other annotations", tpl("foo", "n", map[string]string{"x": "1"}, map[string]string{h: "v1"}), tpl("foo", "n", map[string]string{"y": "1"}, map[string]string{h: "v1"}), false},
		{"other spec", tpl("foo-1", "n1", map[string]string{}, map[string]string{"a": "b"}), tpl("foo-2", "n2", map[string]string{}, map[string]string{h: "v2", "a": "b"}), false},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			for _, pair := range [][2]*corev1.PodTemplateSpec{{&test.former, &test.latter}, {&test.latter, &test.former}} {
				if got := equalIgnoreHash(pair[0], pair[1]); got != test.expected {
					t.Errorf("equalIgnoreHash = %v, want %v", got, test.expected)
				}
				if pair[0].Labels == nil || pair[1].Labels == nil {
					t.Errorf("labels became nil")
				}
			}
			if _, ok := test.latter.Labels[h]; !ok && strings.Contains(test.name, "hash differs") {
				t.Errorf("the input lost its hash label")
			}
		})
	}
}

func TestNonNegativeInt32Annotation(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		value       int32
		valid       bool
		err         string
	}{
		{name: "missing"},
		{name: "invalid", annotations: map[string]string{"test": "invalid"}, err: "invalid syntax"},
		{name: "negative", annotations: map[string]string{"test": "-1"}, err: "invalid syntax"},
		{name: "zero", annotations: map[string]string{"test": "0"}, value: 0, valid: true},
		{name: "valid", annotations: map[string]string{"test": "13"}, value: 13, valid: true},
		{name: "max", annotations: map[string]string{"test": fmt.Sprint(math.MaxInt32)}, value: math.MaxInt32, valid: true},
		{name: "out of range", annotations: map[string]string{"test": fmt.Sprint(uint32(math.MaxInt32) + 1)}, err: "out of range"},
		{name: "out of range 2", annotations: map[string]string{"test": fmt.Sprint(uint64(math.MaxUint32) + 1)}, err: "out of range"},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			r := rs("r", 1, nil, metav1.Time{})
			r.Annotations = test.annotations
			v, ok, err := nonNegativeInt32Annotation(r, "test")
			if v != test.value || ok != test.valid {
				t.Errorf("got %d, %v; want %d, %v", v, ok, test.value, test.valid)
			}
			if (err == nil) != (test.err == "") || (err != nil && !strings.Contains(err.Error(), test.err)) {
				t.Errorf("error %v, want %q", err, test.err)
			}
		})
	}
}
