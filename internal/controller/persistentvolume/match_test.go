package persistentvolume

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// claimUID is the UID of every test claim.
const claimUID = "uid-claim"

const (
	rwo  = corev1.ReadWriteOnce
	rox  = corev1.ReadOnlyMany
	rwx  = corev1.ReadWriteMany
	rwop = corev1.ReadWriteOncePod
)

// pv is an Available volume; change adjusts it.
func pv(name, size string, modes []corev1.PersistentVolumeAccessMode, change ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	v := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes: modes,
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable},
	}
	for _, f := range change {
		f(v)
	}
	return v
}

// pvc is a claim in namespace ns; change adjusts it.
func pvc(name, size string, modes []corev1.PersistentVolumeAccessMode, change ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: claimUID},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: modes,
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	for _, f := range change {
		f(c)
	}
	return c
}

func modes(m ...corev1.PersistentVolumeAccessMode) []corev1.PersistentVolumeAccessMode { return m }

func TestBestMatch(t *testing.T) {
	class := func(name string) func(*corev1.PersistentVolume) {
		return func(v *corev1.PersistentVolume) { v.Spec.StorageClassName = name }
	}
	claimClass := func(name string) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To(name) }
	}
	labels := func(l map[string]string) func(*corev1.PersistentVolume) {
		return func(v *corev1.PersistentVolume) { v.Labels = l }
	}
	selector := func(l map[string]string) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) { c.Spec.Selector = &metav1.LabelSelector{MatchLabels: l} }
	}
	phase := func(p corev1.PersistentVolumePhase) func(*corev1.PersistentVolume) {
		return func(v *corev1.PersistentVolume) { v.Status.Phase = p }
	}
	claimRef := func(name, uid string) func(*corev1.PersistentVolume) {
		return func(v *corev1.PersistentVolume) {
			v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "ns", Name: name, UID: claimUID}
			if uid == "" {
				v.Spec.ClaimRef.UID = ""
			}
		}
	}
	block := func(v *corev1.PersistentVolume) { v.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock) }
	claimBlock := func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock) }
	deleting := func(v *corev1.PersistentVolume) { v.DeletionTimestamp = &metav1.Time{} }

	for _, tc := range []struct {
		name    string
		claim   *corev1.PersistentVolumeClaim
		volumes []*corev1.PersistentVolume
		delay   bool
		want    string // "" for no match
		wantErr bool
	}{
		{name: "smallest that fits", claim: pvc("c", "2Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("1g", "1Gi", modes(rwo)), pv("10g", "10Gi", modes(rwo)), pv("5g", "5Gi", modes(rwo))}, want: "5g"},
		{name: "exact size fits", claim: pvc("c", "1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("1g", "1Gi", modes(rwo))}, want: "1g"},
		{name: "all too small", claim: pvc("c", "2Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("1g", "1Gi", modes(rwo))}},
		{name: "access modes a superset", claim: pvc("c", "1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("both", "1Gi", modes(rwo, rox))}, want: "both"},
		{name: "fewer modes win over a smaller volume with more", claim: pvc("c", "1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("many", "1Gi", modes(rwo, rox, rwx)), pv("one", "5Gi", modes(rwo))}, want: "one"},
		{name: "missing access mode", claim: pvc("c", "1Gi", modes(rwo, rwx)),
			volumes: []*corev1.PersistentVolume{pv("rwo", "1Gi", modes(rwo)), pv("rwop", "1Gi", modes(rwop))}},
		{name: "class must be equal", claim: pvc("c", "1Gi", modes(rwo), claimClass("gold")),
			volumes: []*corev1.PersistentVolume{pv("none", "1Gi", modes(rwo)), pv("silver", "1Gi", modes(rwo), class("silver")), pv("gold", "9Gi", modes(rwo), class("gold"))}, want: "gold"},
		{name: "empty class only takes empty class", claim: pvc("c", "1Gi", modes(rwo), claimClass("")),
			volumes: []*corev1.PersistentVolume{pv("gold", "1Gi", modes(rwo), class("gold")), pv("none", "9Gi", modes(rwo))}, want: "none"},
		{name: "selector on labels", claim: pvc("c", "1Gi", modes(rwo), selector(map[string]string{"tier": "hot"})),
			volumes: []*corev1.PersistentVolume{pv("cold", "1Gi", modes(rwo), labels(map[string]string{"tier": "cold"})), pv("bare", "1Gi", modes(rwo)),
				pv("hot", "2Gi", modes(rwo), labels(map[string]string{"tier": "hot"}))}, want: "hot"},
		{name: "volume mode must match", claim: pvc("c", "1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("block", "1Gi", modes(rwo), block), pv("fs", "2Gi", modes(rwo))}, want: "fs"},
		{name: "block claim takes block volume", claim: pvc("c", "1Gi", modes(rwo), claimBlock),
			volumes: []*corev1.PersistentVolume{pv("fs", "1Gi", modes(rwo)), pv("block", "2Gi", modes(rwo), block)}, want: "block"},
		{name: "only Available volumes", claim: pvc("c", "1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("released", "1Gi", modes(rwo), phase(corev1.VolumeReleased)), pv("pending", "1Gi", modes(rwo), phase(corev1.VolumePending))}},
		{name: "volumes being deleted are skipped", claim: pvc("c", "1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("going", "1Gi", modes(rwo), deleting)}},
		{name: "bound to another claim", claim: pvc("c", "1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("other", "1Gi", modes(rwo), claimRef("other", ""))}},
		{name: "pre-bound volume wins over a smaller one, whatever its class", claim: pvc("c", "1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("small", "1Gi", modes(rwo)), pv("mine", "9Gi", modes(rwo), class("gold"), claimRef("c", ""))}, want: "mine"},
		{name: "pre-bound volume still needs the capacity", claim: pvc("c", "5Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("mine", "1Gi", modes(rwo), claimRef("c", ""))}},
		{name: "delayed binding takes only pre-bound volumes", claim: pvc("c", "1Gi", modes(rwo)), delay: true,
			volumes: []*corev1.PersistentVolume{pv("free", "1Gi", modes(rwo))}},
		{name: "delayed binding with a pre-bound volume", claim: pvc("c", "1Gi", modes(rwo)), delay: true,
			volumes: []*corev1.PersistentVolume{pv("free", "1Gi", modes(rwo)), pv("mine", "1Gi", modes(rwo), claimRef("c", ""))}, want: "mine"},
		{name: "equal volumes: the first by name", claim: pvc("c", "1Gi", modes(rwo)),
			volumes: []*corev1.PersistentVolume{pv("b", "1Gi", modes(rwo)), pv("a", "1Gi", modes(rwo))}, want: "a"},
		{name: "a volume attributes class is not supported", claim: pvc("c", "1Gi", modes(rwo), func(c *corev1.PersistentVolumeClaim) {
			c.Spec.VolumeAttributesClassName = ptr.To("fast")
		}), volumes: []*corev1.PersistentVolume{pv("a", "1Gi", modes(rwo))}, wantErr: true},
		{name: "a bad selector", claim: pvc("c", "1Gi", modes(rwo), func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}
		}), volumes: []*corev1.PersistentVolume{pv("a", "1Gi", modes(rwo))}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := bestMatch(tc.claim, tc.volumes, tc.delay)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != tc.want {
				t.Errorf("matched %q, want %q", name, tc.want)
			}
		})
	}
}

func TestCheckSatisfies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		volume *corev1.PersistentVolume
		claim  *corev1.PersistentVolumeClaim
		want   string
	}{
		{name: "fits", volume: pv("v", "2Gi", modes(rwo, rox)), claim: pvc("c", "1Gi", modes(rox))},
		{name: "too small", volume: pv("v", "1Gi", modes(rwo)), claim: pvc("c", "2Gi", modes(rwo)), want: "requested PV is too small"},
		{name: "class", volume: pv("v", "1Gi", modes(rwo)), claim: pvc("c", "1Gi", modes(rwo), func(c *corev1.PersistentVolumeClaim) {
			c.Spec.StorageClassName = ptr.To("gold")
		}), want: "storageClassName does not match"},
		{name: "volume mode", volume: pv("v", "1Gi", modes(rwo), func(v *corev1.PersistentVolume) {
			v.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
		}), claim: pvc("c", "1Gi", modes(rwo)), want: "incompatible volumeMode"},
		{name: "access mode", volume: pv("v", "1Gi", modes(rwo)), claim: pvc("c", "1Gi", modes(rwx)), want: "incompatible accessMode"},
		{name: "being deleted", volume: pv("v", "1Gi", modes(rwo), func(v *corev1.PersistentVolume) {
			v.DeletionTimestamp = &metav1.Time{}
		}), claim: pvc("c", "1Gi", modes(rwo)), want: `the volume is marked for deletion "v"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkSatisfies(tc.volume, tc.claim)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
