package priority

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

type classes []*schedulingv1.PriorityClass

func (c classes) Get(_ context.Context, gr schema.GroupResource, _, name string) (runtime.Object, error) {
	for _, pc := range c {
		if pc.Name == name {
			return pc.DeepCopy(), nil
		}
	}
	return nil, apierrors.NewNotFound(gr, name)
}

func (c classes) List(context.Context, schema.GroupResource, string) ([]runtime.Object, error) {
	out := make([]runtime.Object, len(c))
	for i, pc := range c {
		out[i] = pc.DeepCopy()
	}
	return out, nil
}

func class(name string, value int32, def bool, policy corev1.PreemptionPolicy) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: def, PreemptionPolicy: &policy}
}

func podAttrs(pod *corev1.Pod, op admission.Operation, old *corev1.Pod) *admission.Attributes {
	a := &admission.Attributes{Resource: corev1.SchemeGroupVersion.WithResource("pods"), Operation: op, Object: pod, Name: pod.Name, Namespace: "ns"}
	if old != nil {
		a.OldObject = old
	}
	return a
}

func TestAdmitPod(t *testing.T) {
	high := class("high", 1000, false, corev1.PreemptNever)
	def := class("def", 10, true, corev1.PreemptLowerPriority)
	i32 := func(v int32) *int32 { return &v }
	cases := []struct {
		name      string
		classes   classes
		pod       corev1.PodSpec
		wantPrio  int32
		wantClass string
		wantErr   string
	}{
		{name: "no class, no default", wantPrio: 0},
		{name: "global default", classes: classes{high, def}, wantPrio: 10, wantClass: "def"},
		{name: "named class", classes: classes{high, def}, pod: corev1.PodSpec{PriorityClassName: "high"}, wantPrio: 1000, wantClass: "high"},
		{name: "missing class", classes: classes{def}, pod: corev1.PodSpec{PriorityClassName: "nope"},
			wantErr: `pods "p" is forbidden: no PriorityClass with name nope was found`},
		{name: "priority given and different", classes: classes{high}, pod: corev1.PodSpec{PriorityClassName: "high", Priority: i32(5)},
			wantErr: "the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name"},
		{name: "priority given and equal", classes: classes{high}, pod: corev1.PodSpec{PriorityClassName: "high", Priority: i32(1000)}, wantPrio: 1000, wantClass: "high"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: tc.pod}
			err := New(tc.classes).Admit(context.Background(), podAttrs(pod, admission.Create, nil))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !apierrors.IsForbidden(err) {
					t.Fatalf("error %v, want a 403 with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pod.Spec.Priority == nil || *pod.Spec.Priority != tc.wantPrio || pod.Spec.PriorityClassName != tc.wantClass {
				t.Fatalf("priority %v class %q, want %d %q", pod.Spec.Priority, pod.Spec.PriorityClassName, tc.wantPrio, tc.wantClass)
			}
			if pod.Spec.PreemptionPolicy == nil {
				t.Fatal("no preemption policy")
			}
		})
	}
}

func TestAdmitPodUpdateKeepsPriority(t *testing.T) {
	p := int32(7)
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Priority: &p}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	if err := New(classes{}).Admit(context.Background(), podAttrs(pod, admission.Update, old)); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.Priority == nil || *pod.Spec.Priority != 7 {
		t.Fatalf("priority %v, want 7", pod.Spec.Priority)
	}
}

func TestValidateOneGlobalDefault(t *testing.T) {
	existing := classes{class("def", 10, true, corev1.PreemptLowerPriority)}
	attrs := func(pc *schedulingv1.PriorityClass, op admission.Operation) *admission.Attributes {
		return &admission.Attributes{Resource: schedulingv1.SchemeGroupVersion.WithResource("priorityclasses"), Operation: op, Object: pc, Name: pc.Name}
	}
	err := New(existing).Validate(context.Background(), attrs(class("other", 5, true, corev1.PreemptNever), admission.Create))
	want := `priorityclasses.scheduling.k8s.io "other" is forbidden: PriorityClass def is already marked as default. Only one default can exist`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	if err := New(existing).Validate(context.Background(), attrs(class("def", 10, true, corev1.PreemptLowerPriority), admission.Update)); err != nil {
		t.Fatalf("updating the default itself: %v", err)
	}
	if err := New(existing).Validate(context.Background(), attrs(class("other", 5, false, corev1.PreemptNever), admission.Create)); err != nil {
		t.Fatalf("a class that is not the default: %v", err)
	}
}
