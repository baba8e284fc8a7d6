package runtimeclass

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

type classes []*nodev1.RuntimeClass

func (c classes) Get(_ context.Context, gr schema.GroupResource, _, name string) (runtime.Object, error) {
	for _, rc := range c {
		if rc.Name == name {
			return rc.DeepCopy(), nil
		}
	}
	return nil, apierrors.NewNotFound(gr, name)
}

func podAttrs(pod *corev1.Pod, op admission.Operation) *admission.Attributes {
	return &admission.Attributes{Resource: corev1.SchemeGroupVersion.WithResource("pods"), Operation: op, Object: pod, Name: pod.Name, Namespace: "ns"}
}

func resources(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

func TestAdmit(t *testing.T) {
	plain := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Handler: "runc"}
	heavy := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "heavy"}, Handler: "kata",
		Overhead: &nodev1.Overhead{PodFixed: resources("10m", "1Mi")}}
	placed := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "placed"}, Handler: "runc",
		Scheduling: &nodev1.Scheduling{
			NodeSelector: map[string]string{"runtime": "gvisor"},
			Tolerations: []corev1.Toleration{
				{Key: "runtime", Operator: corev1.TolerationOpEqual, Value: "gvisor", Effect: corev1.TaintEffectNoSchedule},
				{Key: "other", Operator: corev1.TolerationOpExists},
			}}}
	p := New(classes{plain, heavy, placed})
	name := func(s string) *string { return &s }
	cases := []struct {
		name    string
		spec    corev1.PodSpec
		want    corev1.PodSpec
		wantErr string
	}{
		{name: "no class", spec: corev1.PodSpec{}, want: corev1.PodSpec{}},
		{name: "class without overhead or scheduling", spec: corev1.PodSpec{RuntimeClassName: name("plain")},
			want: corev1.PodSpec{RuntimeClassName: name("plain")}},
		{name: "missing class", spec: corev1.PodSpec{RuntimeClassName: name("nope")},
			wantErr: `pods "p" is forbidden: pod rejected: RuntimeClass "nope" not found`},
		{name: "overhead set", spec: corev1.PodSpec{RuntimeClassName: name("heavy")},
			want: corev1.PodSpec{RuntimeClassName: name("heavy"), Overhead: resources("10m", "1Mi")}},
		{name: "same overhead given", spec: corev1.PodSpec{RuntimeClassName: name("heavy"), Overhead: resources("0.01", "1024Ki")},
			want: corev1.PodSpec{RuntimeClassName: name("heavy"), Overhead: resources("10m", "1Mi")}},
		{name: "other overhead given", spec: corev1.PodSpec{RuntimeClassName: name("heavy"), Overhead: resources("20m", "1Mi")},
			wantErr: `pods "p" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead`},
		{name: "scheduling merged",
			spec: corev1.PodSpec{RuntimeClassName: name("placed"), NodeSelector: map[string]string{"zone": "a"},
				Tolerations: []corev1.Toleration{{Key: "other", Operator: corev1.TolerationOpEqual, Value: "x"}}},
			want: corev1.PodSpec{RuntimeClassName: name("placed"), NodeSelector: map[string]string{"zone": "a", "runtime": "gvisor"},
				Tolerations: []corev1.Toleration{
					{Key: "runtime", Operator: corev1.TolerationOpEqual, Value: "gvisor", Effect: corev1.TaintEffectNoSchedule},
					{Key: "other", Operator: corev1.TolerationOpExists},
				}}},
		{name: "same selector value", spec: corev1.PodSpec{RuntimeClassName: name("placed"), NodeSelector: map[string]string{"runtime": "gvisor"}},
			want: corev1.PodSpec{RuntimeClassName: name("placed"), NodeSelector: map[string]string{"runtime": "gvisor"}, Tolerations: placed.Scheduling.Tolerations}},
		{name: "selector conflict", spec: corev1.PodSpec{RuntimeClassName: name("placed"), NodeSelector: map[string]string{"runtime": "runc"}},
			wantErr: `pods "p" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[runtime] = gvisor; pod.spec.nodeSelector[runtime] = runc`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: tc.spec}
			err := p.Admit(context.Background(), podAttrs(pod, admission.Create))
			if tc.wantErr != "" {
				if !apierrors.IsForbidden(err) || err.Error() != tc.wantErr {
					t.Fatalf("err %v, want 403 %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pod.Spec, tc.want) {
				t.Fatalf("spec\n%+v\nwant\n%+v", pod.Spec, tc.want)
			}
			if err := p.Validate(context.Background(), podAttrs(pod, admission.Create)); err != nil {
				t.Fatalf("validate after admit: %v", err)
			}
		})
	}

	// Updates, subresources and other kinds are left alone.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{RuntimeClassName: name("nope")}}
	if err := p.Admit(context.Background(), podAttrs(pod, admission.Update)); err != nil {
		t.Fatalf("update: %v", err)
	}
	a := podAttrs(pod, admission.Create)
	a.Subresource = "status"
	if err := p.Admit(context.Background(), a); err != nil {
		t.Fatalf("subresource: %v", err)
	}
}

func TestValidate(t *testing.T) {
	heavy := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "heavy"}, Handler: "kata",
		Overhead: &nodev1.Overhead{PodFixed: resources("10m", "1Mi")}}
	plain := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Handler: "runc"}
	p := New(classes{heavy, plain})
	name := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		spec    corev1.PodSpec
		wantErr string
	}{
		{"no overhead", corev1.PodSpec{RuntimeClassName: name("plain")}, ""},
		{"overhead without a class", corev1.PodSpec{Overhead: resources("1m", "1Mi")},
			`pods "p" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead`},
		{"overhead of a class without one", corev1.PodSpec{RuntimeClassName: name("plain"), Overhead: resources("1m", "1Mi")},
			`pods "p" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead`},
		{"overhead changed after admit", corev1.PodSpec{RuntimeClassName: name("heavy"), Overhead: resources("1m", "1Mi")},
			`pods "p" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead`},
		{"class's overhead", corev1.PodSpec{RuntimeClassName: name("heavy"), Overhead: resources("10m", "1Mi")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: tc.spec}
			err := p.Validate(context.Background(), podAttrs(pod, admission.Create))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (!apierrors.IsForbidden(err) || err.Error() != tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestMergeTolerations(t *testing.T) {
	sec := func(s int64) *int64 { return &s }
	exists := func(key string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	equal := func(key, value string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpEqual, Value: value, Effect: effect}
	}
	bounded := func(key string, s int64) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: sec(s)}
	}
	for _, tc := range []struct {
		name          string
		first, second []corev1.Toleration
		want          []corev1.Toleration
	}{
		{"disjoint", []corev1.Toleration{exists("a", "")}, []corev1.Toleration{exists("b", "")}, []corev1.Toleration{exists("a", ""), exists("b", "")}},
		{"equal kept once", []corev1.Toleration{equal("a", "1", "")}, []corev1.Toleration{equal("a", "1", "")}, []corev1.Toleration{equal("a", "1", "")}},
		{"Exists covers Equal", []corev1.Toleration{equal("a", "1", corev1.TaintEffectNoSchedule)}, []corev1.Toleration{exists("a", "")}, []corev1.Toleration{exists("a", "")}},
		{"an empty key with Exists covers all", []corev1.Toleration{exists("a", corev1.TaintEffectNoSchedule), equal("b", "x", "")}, []corev1.Toleration{exists("", "")}, []corev1.Toleration{exists("", "")}},
		{"an effect does not cover another", []corev1.Toleration{exists("a", corev1.TaintEffectNoSchedule)}, []corev1.Toleration{exists("a", corev1.TaintEffectNoExecute)},
			[]corev1.Toleration{exists("a", corev1.TaintEffectNoSchedule), exists("a", corev1.TaintEffectNoExecute)}},
		{"the longer bound covers the shorter", []corev1.Toleration{bounded("a", 300)}, []corev1.Toleration{bounded("a", 30)}, []corev1.Toleration{bounded("a", 300)}},
		{"a bound does not cover no bound", []corev1.Toleration{exists("a", corev1.TaintEffectNoExecute)}, []corev1.Toleration{bounded("a", 30)}, []corev1.Toleration{exists("a", corev1.TaintEffectNoExecute)}},
		{"different values", []corev1.Toleration{equal("a", "1", "")}, []corev1.Toleration{equal("a", "2", "")}, []corev1.Toleration{equal("a", "1", ""), equal("a", "2", "")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MergeTolerations(tc.first, tc.second); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
