package volumebinding

import (
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

func TestQueueingHints(t *testing.T) {
	hints := map[framework.EventResource]framework.QueueingHintFn{}
	actions := map[framework.EventResource]framework.ActionType{}
	for _, e := range (&VolumeBinding{}).EventsToRegister() {
		hints[e.Event.Resource], actions[e.Event.Resource] = e.QueueingHintFn, e.Event.ActionType
	}
	if actions[framework.PersistentVolume] != framework.Add|framework.Update || hints[framework.PersistentVolume] != nil {
		t.Errorf("volumes: %v, hint %v", actions[framework.PersistentVolume], hints[framework.PersistentVolume] != nil)
	}
	if _, ok := actions[framework.CSINode]; ok {
		t.Error("CSINodes registered: without CSI migration they cannot help")
	}
	p := pod("p", "data")
	other := claim("data", "local", "1Gi")
	other.Namespace = "elsewhere"
	sc := class("c", "x", wffc)
	topo := class("c", "x", wffc, zones("a"))
	labelled := class("c", "x", wffc)
	labelled.Labels = map[string]string{"a": "b"}
	driver := func(capacity *bool) *storagev1.CSIDriver {
		return &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{StorageCapacity: capacity}}
	}
	capacity := func(size string, max *resource.Quantity) *storagev1.CSIStorageCapacity {
		q := resource.MustParse(size)
		return &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Capacity: &q, MaximumVolumeSize: max}
	}
	for _, tc := range []struct {
		name     string
		resource framework.EventResource
		old, new any
		want     bool
	}{
		{"the pod's claim added", framework.PersistentVolumeClaim, nil, claim("data", "local", "1Gi"), true},
		{"the pod's claim updated", framework.PersistentVolumeClaim, claim("data", "local", "1Gi"), boundClaim("data", "local", "1Gi", "pv"), true},
		{"another claim", framework.PersistentVolumeClaim, nil, claim("logs", "local", "1Gi"), false},
		{"a claim of that name in another namespace", framework.PersistentVolumeClaim, nil, other, false},
		{"a new class", framework.StorageClass, nil, sc, true},
		{"new allowedTopologies", framework.StorageClass, sc, topo, true},
		{"a class's labels", framework.StorageClass, sc, labelled, false},
		{"capacity checks turned off", framework.CSIDriver, driver(ptr.To(true)), driver(ptr.To(false)), true},
		{"capacity checks turned on", framework.CSIDriver, driver(nil), driver(ptr.To(true)), false},
		{"a new capacity", framework.CSIStorageCapacity, nil, capacity("1Gi", nil), true},
		{"a capacity grew", framework.CSIStorageCapacity, capacity("1Gi", nil), capacity("2Gi", nil), true},
		{"a capacity shrank", framework.CSIStorageCapacity, capacity("2Gi", nil), capacity("1Gi", nil), false},
		{"the maximum volume size counts first", framework.CSIStorageCapacity, capacity("1Gi", nil), capacity("5Gi", ptr.To(resource.MustParse("512Mi"))), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := hints[tc.resource](p, tc.old, tc.new); got != tc.want {
				t.Errorf("hint %v, want %v", got, tc.want)
			}
		})
	}
}
