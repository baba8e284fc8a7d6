package noderesources

import (
	"context"
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

func reason(name corev1.ResourceName) string { return "Insufficient " + string(name) }

type filterCase struct {
	name       string
	pod        *corev1.Pod
	nodeInfo   *framework.NodeInfo
	args       FitArgs
	wantCode   framework.Code
	wantReason []string
	wantShort  []InsufficientResource
}

func runFilterCases(t *testing.T, node func() *corev1.Node, tests []filterCase) {
	t.Helper()
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.nodeInfo.SetNode(node())
			p, err := NewFit(ctx, tc.args, nil)
			if err != nil {
				t.Fatal(err)
			}
			state := framework.NewCycleState()
			if st := p.(framework.PreFilterPlugin).PreFilter(ctx, state, tc.pod); !st.IsSuccess() {
				t.Fatalf("PreFilter: %v", st.Message())
			}
			st := p.(framework.FilterPlugin).Filter(ctx, state, tc.pod, tc.nodeInfo)
			if st.Code() != tc.wantCode {
				t.Errorf("code = %v, want %v", st.Code(), tc.wantCode)
			}
			if !reflect.DeepEqual(st.Reasons(), tc.wantReason) {
				t.Errorf("reasons = %q, want %q", st.Reasons(), tc.wantReason)
			}
			if tc.wantShort != nil {
				s := p.(*Fit).computePodResourceRequest(tc.pod)
				got := fitsRequest(s, tc.nodeInfo, nil)
				if len(tc.wantShort) == 0 {
					tc.wantShort = nil
				}
				if !reflect.DeepEqual(got, tc.wantShort) {
					t.Errorf("insufficient = %+v, want %+v", got, tc.wantShort)
				}
			}
		})
	}
}

// The cases are upstream's TestEnoughRequests table (current upstream, which marks
// a request larger than the node's whole allocatable as unresolvable).
func TestEnoughRequests(t *testing.T) {
	const (
		unsched      = framework.Unschedulable
		unresolvable = framework.UnschedulableAndUnresolvable
	)
	cpu, mem := corev1.ResourceCPU, corev1.ResourceMemory
	res := func(milliCPU, memory int64) framework.Resource {
		return framework.Resource{MilliCPU: milliCPU, Memory: memory}
	}
	scalar := func(milliCPU, memory int64, s map[corev1.ResourceName]int64) framework.Resource {
		return framework.Resource{MilliCPU: milliCPU, Memory: memory, ScalarResources: s}
	}
	tests := []filterCase{
		{
			name:      "no resources requested always fits",
			pod:       &corev1.Pod{},
			nodeInfo:  framework.NewNodeInfo(newResourcePod(res(10, 20))),
			wantShort: []InsufficientResource{},
		},
		{
			name:       "too many resources fails",
			pod:        newResourcePod(res(1, 1)),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(res(10, 20))),
			wantCode:   unsched,
			wantReason: []string{reason(cpu), reason(mem)},
			wantShort: []InsufficientResource{
				{ResourceName: cpu, Reason: reason(cpu), Requested: 1, Used: 10, Capacity: 10},
				{ResourceName: mem, Reason: reason(mem), Requested: 1, Used: 20, Capacity: 20},
			},
		},
		{
			name:       "too many resources fails due to init container cpu",
			pod:        newResourceInitPod(newResourcePod(res(1, 1)), res(3, 1)),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(res(8, 19))),
			wantCode:   unsched,
			wantReason: []string{reason(cpu)},
			wantShort:  []InsufficientResource{{ResourceName: cpu, Reason: reason(cpu), Requested: 3, Used: 8, Capacity: 10}},
		},
		{
			name:       "too many resources fails due to highest init container cpu",
			pod:        newResourceInitPod(newResourcePod(res(1, 1)), res(3, 1), res(2, 1)),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(res(8, 19))),
			wantCode:   unsched,
			wantReason: []string{reason(cpu)},
			wantShort:  []InsufficientResource{{ResourceName: cpu, Reason: reason(cpu), Requested: 3, Used: 8, Capacity: 10}},
		},
		{
			name:       "too many resources fails due to init container memory",
			pod:        newResourceInitPod(newResourcePod(res(1, 1)), res(1, 3)),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(res(9, 19))),
			wantCode:   unsched,
			wantReason: []string{reason(mem)},
			wantShort:  []InsufficientResource{{ResourceName: mem, Reason: reason(mem), Requested: 3, Used: 19, Capacity: 20}},
		},
		{
			name:       "too many resources fails due to highest init container memory",
			pod:        newResourceInitPod(newResourcePod(res(1, 1)), res(1, 3), res(1, 2)),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(res(9, 19))),
			wantCode:   unsched,
			wantReason: []string{reason(mem)},
			wantShort:  []InsufficientResource{{ResourceName: mem, Reason: reason(mem), Requested: 3, Used: 19, Capacity: 20}},
		},
		{
			name:      "init container fits because it's the max, not sum, of containers and init containers",
			pod:       newResourceInitPod(newResourcePod(res(1, 1)), res(1, 1)),
			nodeInfo:  framework.NewNodeInfo(newResourcePod(res(9, 19))),
			wantShort: []InsufficientResource{},
		},
		{
			name:      "multiple init containers fit because it's the max, not sum, of containers and init containers",
			pod:       newResourceInitPod(newResourcePod(res(1, 1)), res(1, 1), res(1, 1)),
			nodeInfo:  framework.NewNodeInfo(newResourcePod(res(9, 19))),
			wantShort: []InsufficientResource{},
		},
		{
			name:      "both resources fit",
			pod:       newResourcePod(res(1, 1)),
			nodeInfo:  framework.NewNodeInfo(newResourcePod(res(5, 5))),
			wantShort: []InsufficientResource{},
		},
		{
			name:       "one resource memory fits",
			pod:        newResourcePod(res(2, 1)),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(res(9, 5))),
			wantCode:   unsched,
			wantReason: []string{reason(cpu)},
			wantShort:  []InsufficientResource{{ResourceName: cpu, Reason: reason(cpu), Requested: 2, Used: 9, Capacity: 10}},
		},
		{
			name:       "one resource cpu fits",
			pod:        newResourcePod(res(1, 2)),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(res(5, 19))),
			wantCode:   unsched,
			wantReason: []string{reason(mem)},
			wantShort:  []InsufficientResource{{ResourceName: mem, Reason: reason(mem), Requested: 2, Used: 19, Capacity: 20}},
		},
		{
			name:      "equal edge case",
			pod:       newResourcePod(res(5, 1)),
			nodeInfo:  framework.NewNodeInfo(newResourcePod(res(5, 19))),
			wantShort: []InsufficientResource{},
		},
		{
			name:      "equal edge case for init container",
			pod:       newResourceInitPod(newResourcePod(res(4, 1)), res(5, 1)),
			nodeInfo:  framework.NewNodeInfo(newResourcePod(res(5, 19))),
			wantShort: []InsufficientResource{},
		},
		{
			name:      "extended resource fits",
			pod:       newResourcePod(scalar(0, 0, map[corev1.ResourceName]int64{extendedResourceA: 1})),
			nodeInfo:  framework.NewNodeInfo(newResourcePod(framework.Resource{})),
			wantShort: []InsufficientResource{},
		},
		{
			name:      "extended resource fits for init container",
			pod:       newResourceInitPod(newResourcePod(framework.Resource{}), scalar(0, 0, map[corev1.ResourceName]int64{extendedResourceA: 1})),
			nodeInfo:  framework.NewNodeInfo(newResourcePod(framework.Resource{})),
			wantShort: []InsufficientResource{},
		},
		{
			name:       "extended resource capacity enforced",
			pod:        newResourcePod(scalar(1, 1, map[corev1.ResourceName]int64{extendedResourceA: 10})),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(scalar(0, 0, map[corev1.ResourceName]int64{extendedResourceA: 0}))),
			wantCode:   unresolvable,
			wantReason: []string{reason(extendedResourceA)},
			wantShort:  []InsufficientResource{{ResourceName: extendedResourceA, Reason: reason(extendedResourceA), Requested: 10, Used: 0, Capacity: 5, Unresolvable: true}},
		},
		{
			name:       "extended resource capacity enforced for init container",
			pod:        newResourceInitPod(newResourcePod(framework.Resource{}), scalar(1, 1, map[corev1.ResourceName]int64{extendedResourceA: 10})),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(scalar(0, 0, map[corev1.ResourceName]int64{extendedResourceA: 0}))),
			wantCode:   unresolvable,
			wantReason: []string{reason(extendedResourceA)},
			wantShort:  []InsufficientResource{{ResourceName: extendedResourceA, Reason: reason(extendedResourceA), Requested: 10, Used: 0, Capacity: 5, Unresolvable: true}},
		},
		{
			name:       "extended resource allocatable enforced",
			pod:        newResourcePod(scalar(1, 1, map[corev1.ResourceName]int64{extendedResourceA: 1})),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(scalar(0, 0, map[corev1.ResourceName]int64{extendedResourceA: 5}))),
			wantCode:   unsched,
			wantReason: []string{reason(extendedResourceA)},
			wantShort:  []InsufficientResource{{ResourceName: extendedResourceA, Reason: reason(extendedResourceA), Requested: 1, Used: 5, Capacity: 5}},
		},
		{
			name:       "extended resource allocatable enforced for init container",
			pod:        newResourceInitPod(newResourcePod(framework.Resource{}), scalar(1, 1, map[corev1.ResourceName]int64{extendedResourceA: 1})),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(scalar(0, 0, map[corev1.ResourceName]int64{extendedResourceA: 5}))),
			wantCode:   unsched,
			wantReason: []string{reason(extendedResourceA)},
			wantShort:  []InsufficientResource{{ResourceName: extendedResourceA, Reason: reason(extendedResourceA), Requested: 1, Used: 5, Capacity: 5}},
		},
		{
			name: "extended resource allocatable enforced for multiple containers",
			pod: newResourcePod(scalar(1, 1, map[corev1.ResourceName]int64{extendedResourceA: 3}),
				scalar(1, 1, map[corev1.ResourceName]int64{extendedResourceA: 3})),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(scalar(0, 0, map[corev1.ResourceName]int64{extendedResourceA: 2}))),
			wantCode:   unresolvable,
			wantReason: []string{reason(extendedResourceA)},
			wantShort:  []InsufficientResource{{ResourceName: extendedResourceA, Reason: reason(extendedResourceA), Requested: 6, Used: 2, Capacity: 5, Unresolvable: true}},
		},
		{
			name: "extended resource allocatable admits multiple init containers",
			pod: newResourceInitPod(newResourcePod(framework.Resource{}),
				scalar(1, 1, map[corev1.ResourceName]int64{extendedResourceA: 3}),
				scalar(1, 1, map[corev1.ResourceName]int64{extendedResourceA: 3})),
			nodeInfo:  framework.NewNodeInfo(newResourcePod(scalar(0, 0, map[corev1.ResourceName]int64{extendedResourceA: 2}))),
			wantShort: []InsufficientResource{},
		},
		{
			name: "extended resource allocatable enforced for multiple init containers",
			pod: newResourceInitPod(newResourcePod(framework.Resource{}),
				scalar(1, 1, map[corev1.ResourceName]int64{extendedResourceA: 6}),
				scalar(1, 1, map[corev1.ResourceName]int64{extendedResourceA: 3})),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(scalar(0, 0, map[corev1.ResourceName]int64{extendedResourceA: 2}))),
			wantCode:   unresolvable,
			wantReason: []string{reason(extendedResourceA)},
			wantShort:  []InsufficientResource{{ResourceName: extendedResourceA, Reason: reason(extendedResourceA), Requested: 6, Used: 2, Capacity: 5, Unresolvable: true}},
		},
		{
			name:       "extended resource allocatable enforced for unknown resource",
			pod:        newResourcePod(scalar(1, 1, map[corev1.ResourceName]int64{extendedResourceB: 1})),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(res(0, 0))),
			wantCode:   unresolvable,
			wantReason: []string{reason(extendedResourceB)},
			wantShort:  []InsufficientResource{{ResourceName: extendedResourceB, Reason: reason(extendedResourceB), Requested: 1, Used: 0, Capacity: 0, Unresolvable: true}},
		},
		{
			name:       "extended resource allocatable enforced for unknown resource for init container",
			pod:        newResourceInitPod(newResourcePod(framework.Resource{}), scalar(1, 1, map[corev1.ResourceName]int64{extendedResourceB: 1})),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(res(0, 0))),
			wantCode:   unresolvable,
			wantReason: []string{reason(extendedResourceB)},
			wantShort:  []InsufficientResource{{ResourceName: extendedResourceB, Reason: reason(extendedResourceB), Requested: 1, Used: 0, Capacity: 0, Unresolvable: true}},
		},
		{
			name:       "kubernetes.io resource capacity enforced",
			pod:        newResourcePod(scalar(1, 1, map[corev1.ResourceName]int64{kubernetesIOResourceA: 10})),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(res(0, 0))),
			wantCode:   unresolvable,
			wantReason: []string{reason(kubernetesIOResourceA)},
			wantShort:  []InsufficientResource{{ResourceName: kubernetesIOResourceA, Reason: reason(kubernetesIOResourceA), Requested: 10, Used: 0, Capacity: 0, Unresolvable: true}},
		},
		{
			name:       "kubernetes.io resource capacity enforced for init container",
			pod:        newResourceInitPod(newResourcePod(framework.Resource{}), scalar(1, 1, map[corev1.ResourceName]int64{kubernetesIOResourceB: 10})),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(res(0, 0))),
			wantCode:   unresolvable,
			wantReason: []string{reason(kubernetesIOResourceB)},
			wantShort:  []InsufficientResource{{ResourceName: kubernetesIOResourceB, Reason: reason(kubernetesIOResourceB), Requested: 10, Used: 0, Capacity: 0, Unresolvable: true}},
		},
		{
			name:       "hugepages resource capacity enforced",
			pod:        newResourcePod(scalar(1, 1, map[corev1.ResourceName]int64{hugePageResourceA: 10})),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(scalar(0, 0, map[corev1.ResourceName]int64{hugePageResourceA: 0}))),
			wantCode:   unresolvable,
			wantReason: []string{reason(hugePageResourceA)},
			wantShort:  []InsufficientResource{{ResourceName: hugePageResourceA, Reason: reason(hugePageResourceA), Requested: 10, Used: 0, Capacity: 5, Unresolvable: true}},
		},
		{
			name:       "hugepages resource capacity enforced for init container",
			pod:        newResourceInitPod(newResourcePod(framework.Resource{}), scalar(1, 1, map[corev1.ResourceName]int64{hugePageResourceA: 10})),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(scalar(0, 0, map[corev1.ResourceName]int64{hugePageResourceA: 0}))),
			wantCode:   unresolvable,
			wantReason: []string{reason(hugePageResourceA)},
			wantShort:  []InsufficientResource{{ResourceName: hugePageResourceA, Reason: reason(hugePageResourceA), Requested: 10, Used: 0, Capacity: 5, Unresolvable: true}},
		},
		{
			name: "hugepages resource allocatable enforced for multiple containers",
			pod: newResourcePod(scalar(1, 1, map[corev1.ResourceName]int64{hugePageResourceA: 3}),
				scalar(1, 1, map[corev1.ResourceName]int64{hugePageResourceA: 3})),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(scalar(0, 0, map[corev1.ResourceName]int64{hugePageResourceA: 2}))),
			wantCode:   unresolvable,
			wantReason: []string{reason(hugePageResourceA)},
			wantShort:  []InsufficientResource{{ResourceName: hugePageResourceA, Reason: reason(hugePageResourceA), Requested: 6, Used: 2, Capacity: 5, Unresolvable: true}},
		},
		{
			name:      "skip checking ignored extended resource",
			pod:       newResourcePod(scalar(1, 1, map[corev1.ResourceName]int64{extendedResourceB: 1})),
			nodeInfo:  framework.NewNodeInfo(newResourcePod(res(0, 0))),
			args:      FitArgs{IgnoredResources: []string{"example.com/bbb"}},
			wantShort: []InsufficientResource{},
		},
		{
			name: "resources + pod overhead fits",
			pod: newResourceOverheadPod(newResourcePod(res(1, 1)),
				corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3m"), corev1.ResourceMemory: resource.MustParse("13")}),
			nodeInfo:  framework.NewNodeInfo(newResourcePod(res(5, 5))),
			wantShort: []InsufficientResource{},
		},
		{
			name: "requests + overhead does not fit for memory",
			pod: newResourceOverheadPod(newResourcePod(res(1, 1)),
				corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("15")}),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(res(5, 5))),
			wantCode:   unsched,
			wantReason: []string{reason(mem)},
			wantShort:  []InsufficientResource{{ResourceName: mem, Reason: reason(mem), Requested: 16, Used: 5, Capacity: 20}},
		},
		{
			name:       "skip checking ignored extended resource via resource groups",
			pod:        newResourcePod(scalar(1, 1, map[corev1.ResourceName]int64{extendedResourceB: 1, kubernetesIOResourceA: 1})),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(res(0, 0))),
			args:       FitArgs{IgnoredResourceGroups: []string{"example.com"}},
			wantCode:   unresolvable,
			wantReason: []string{reason(kubernetesIOResourceA)},
			wantShort:  []InsufficientResource{{ResourceName: kubernetesIOResourceA, Reason: reason(kubernetesIOResourceA), Requested: 1, Used: 0, Capacity: 0, Unresolvable: true}},
		},
		{
			name:      "skip checking extended resource request with quantity zero via resource groups",
			pod:       newResourcePod(scalar(1, 1, map[corev1.ResourceName]int64{extendedResourceA: 0})),
			nodeInfo:  framework.NewNodeInfo(newResourcePod(scalar(0, 0, map[corev1.ResourceName]int64{extendedResourceA: 6}))),
			wantShort: []InsufficientResource{},
		},
		{
			name:      "skip checking resource request with quantity zero",
			pod:       newResourcePod(scalar(0, 0, map[corev1.ResourceName]int64{extendedResourceA: 1})),
			nodeInfo:  framework.NewNodeInfo(newResourcePod(scalar(20, 30, map[corev1.ResourceName]int64{extendedResourceA: 1}))),
			wantShort: []InsufficientResource{},
		},
		// Beyond upstream's table: several short scalar resources come out sorted by name.
		{
			name: "scalar reasons are in name order",
			pod: newResourcePod(scalar(1, 1, map[corev1.ResourceName]int64{
				kubernetesIOResourceA: 1, extendedResourceB: 1, hugePageResourceA: 9, extendedResourceA: 6,
			})),
			nodeInfo: framework.NewNodeInfo(newResourcePod(res(0, 0))),
			wantCode: unresolvable,
			wantReason: []string{
				reason(extendedResourceA), reason(extendedResourceB), reason(hugePageResourceA), reason(kubernetesIOResourceA),
			},
		},
	}
	runFilterCases(t, func() *corev1.Node {
		rl := makeAllocatableResources(10, 20, 32, 5, 20, 5)
		return &corev1.Node{Status: corev1.NodeStatus{Capacity: rl, Allocatable: rl}}
	}, tests)
}

// Upstream's TestNotEnoughRequests: a node with room for one pod that already has one.
func TestNotEnoughRequests(t *testing.T) {
	tests := []filterCase{
		{
			name:     "even without specified resources, predicate fails when there's no space for additional pod",
			pod:      &corev1.Pod{},
			nodeInfo: framework.NewNodeInfo(newResourcePod(framework.Resource{MilliCPU: 10, Memory: 20})),
		},
		{
			name:     "even if both resources fit, predicate fails when there's no space for additional pod",
			pod:      newResourcePod(framework.Resource{MilliCPU: 1, Memory: 1}),
			nodeInfo: framework.NewNodeInfo(newResourcePod(framework.Resource{MilliCPU: 5, Memory: 5})),
		},
		{
			name:     "even for equal edge case, predicate fails when there's no space for additional pod",
			pod:      newResourcePod(framework.Resource{MilliCPU: 5, Memory: 1}),
			nodeInfo: framework.NewNodeInfo(newResourcePod(framework.Resource{MilliCPU: 5, Memory: 19})),
		},
		{
			name:     "even for equal edge case, predicate fails when there's no space for additional pod due to init container",
			pod:      newResourceInitPod(newResourcePod(framework.Resource{MilliCPU: 5, Memory: 1}), framework.Resource{MilliCPU: 5, Memory: 1}),
			nodeInfo: framework.NewNodeInfo(newResourcePod(framework.Resource{MilliCPU: 5, Memory: 19})),
		},
	}
	for i := range tests {
		tests[i].wantCode = framework.Unschedulable
		tests[i].wantReason = []string{"Too many pods"}
	}
	runFilterCases(t, func() *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Allocatable: makeAllocatableResources(10, 20, 1, 0, 0, 0)}}
	}, tests)
}

// Upstream's TestStorageRequests.
func TestStorageRequests(t *testing.T) {
	tests := []filterCase{
		{
			name:     "empty storage requested, and pod fits",
			pod:      newResourcePod(framework.Resource{MilliCPU: 1, Memory: 1}),
			nodeInfo: framework.NewNodeInfo(newResourcePod(framework.Resource{MilliCPU: 2, Memory: 10})),
		},
		{
			name:       "storage ephemeral local storage request exceeds allocatable",
			pod:        newResourcePod(framework.Resource{EphemeralStorage: 25}),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(framework.Resource{MilliCPU: 2, Memory: 2})),
			wantCode:   framework.UnschedulableAndUnresolvable,
			wantReason: []string{"Insufficient ephemeral-storage"},
		},
		{
			name:     "ephemeral local storage is sufficient",
			pod:      newResourceInitPod(newResourcePod(framework.Resource{EphemeralStorage: 5})),
			nodeInfo: framework.NewNodeInfo(newResourcePod(framework.Resource{MilliCPU: 2, Memory: 2, EphemeralStorage: 10})),
		},
		{
			name:     "pod fits",
			pod:      newResourcePod(framework.Resource{EphemeralStorage: 10}),
			nodeInfo: framework.NewNodeInfo(newResourcePod(framework.Resource{MilliCPU: 2, Memory: 2})),
		},
		// Beyond upstream's table: short but not beyond the node's size.
		{
			name:       "ephemeral storage used by other pods",
			pod:        newResourcePod(framework.Resource{EphemeralStorage: 11}),
			nodeInfo:   framework.NewNodeInfo(newResourcePod(framework.Resource{EphemeralStorage: 10})),
			wantCode:   framework.Unschedulable,
			wantReason: []string{"Insufficient ephemeral-storage"},
		},
	}
	runFilterCases(t, func() *corev1.Node {
		rl := makeAllocatableResources(10, 20, 32, 5, 20, 5)
		return &corev1.Node{Status: corev1.NodeStatus{Capacity: rl, Allocatable: rl}}
	}, tests)
}

// All reasons at once, in upstream's order: pods, cpu, memory, ephemeral-storage, scalars.
func TestFilterReasonOrder(t *testing.T) {
	tests := []filterCase{{
		name: "everything short",
		pod: newResourcePod(framework.Resource{MilliCPU: 2, Memory: 2, EphemeralStorage: 2,
			ScalarResources: map[corev1.ResourceName]int64{extendedResourceA: 2}}),
		nodeInfo: framework.NewNodeInfo(newResourcePod(framework.Resource{MilliCPU: 9, Memory: 9, EphemeralStorage: 9,
			ScalarResources: map[corev1.ResourceName]int64{extendedResourceA: 9}})),
		wantCode: framework.Unschedulable,
		wantReason: []string{"Too many pods", "Insufficient cpu", "Insufficient memory",
			"Insufficient ephemeral-storage", "Insufficient example.com/aaa"},
	}}
	runFilterCases(t, func() *corev1.Node {
		rl := makeAllocatableResources(10, 10, 1, 10, 10, 0)
		return &corev1.Node{Status: corev1.NodeStatus{Allocatable: rl}}
	}, tests)
}

func TestFilterWithoutPreFilter(t *testing.T) {
	ctx := context.Background()
	p, err := NewFit(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(&corev1.Node{})
	st := p.(framework.FilterPlugin).Filter(ctx, framework.NewCycleState(), &corev1.Pod{}, ni)
	if st.Code() != framework.Error || !errors.Is(st.AsError(), framework.ErrNotFound) {
		t.Fatalf("status = %v %q, want Error wrapping ErrNotFound", st.Code(), st.Message())
	}
}

func TestFits(t *testing.T) {
	ni := framework.NewNodeInfo(newResourcePod(framework.Resource{MilliCPU: 8}))
	ni.SetNode(&corev1.Node{Status: corev1.NodeStatus{Allocatable: makeAllocatableResources(10, 20, 32, 0, 0, 0)}})
	got := Fits(newResourcePod(framework.Resource{MilliCPU: 3}), ni)
	want := []InsufficientResource{{ResourceName: corev1.ResourceCPU, Reason: "Insufficient cpu", Requested: 3, Used: 8, Capacity: 10}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Fits = %+v, want %+v", got, want)
	}
	if got := Fits(newResourcePod(framework.Resource{MilliCPU: 2}), ni); got != nil {
		t.Fatalf("Fits = %+v, want nil", got)
	}
}

func TestArgs(t *testing.T) {
	ctx := context.Background()
	bad := []struct {
		name string
		args any
	}{
		{"wrong type", struct{}{}},
		{"unknown strategy", FitArgs{ScoringStrategy: &ScoringStrategy{Type: "Random"}}},
		{"negative weight", FitArgs{ScoringStrategy: &ScoringStrategy{Resources: []ResourceSpec{{Name: "memory", Weight: -1}}}}},
		{"weight above 100", &FitArgs{ScoringStrategy: &ScoringStrategy{Resources: []ResourceSpec{{Name: "memory", Weight: 101}}}}},
		{"duplicate resource", FitArgs{ScoringStrategy: &ScoringStrategy{Resources: []ResourceSpec{{Name: "cpu"}, {Name: "cpu"}}}}},
		{"unsorted shape", FitArgs{ScoringStrategy: &ScoringStrategy{Type: RequestedToCapacityRatio,
			RequestedToCapacityRatio: &RequestedToCapacityRatioParam{Shape: []UtilizationShapePoint{{Utilization: 50}, {Utilization: 10}}}}}},
		{"shape score above 10", FitArgs{ScoringStrategy: &ScoringStrategy{Type: RequestedToCapacityRatio,
			RequestedToCapacityRatio: &RequestedToCapacityRatioParam{Shape: []UtilizationShapePoint{{Utilization: 0, Score: 11}}}}}},
	}
	for _, tc := range bad {
		if _, err := NewFit(ctx, tc.args, nil); err == nil {
			t.Errorf("%s: NewFit accepted %+v", tc.name, tc.args)
		}
	}
	for _, args := range []any{BalancedAllocationArgs{Resources: []ResourceSpec{{Name: "cpu", Weight: 2}}}, 3} {
		if _, err := NewBalancedAllocation(ctx, args, nil); err == nil {
			t.Errorf("NewBalancedAllocation accepted %+v", args)
		}
	}
	p, err := New(ctx, (*FitArgs)(nil), nil)
	if err != nil || p.Name() != "NodeResourcesFit" {
		t.Fatalf("New(nil args) = %v, %v", p, err)
	}
	if p, err := NewBalancedAllocation(ctx, nil, nil); err != nil || p.Name() != "NodeResourcesBalancedAllocation" {
		t.Fatalf("NewBalancedAllocation(nil) = %v, %v", p, err)
	}
}

func benchmarkFitFilter(b *testing.B, pod *corev1.Pod, ni *framework.NodeInfo, wantSuccess bool) {
	ctx := context.Background()
	p, err := NewFit(ctx, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	pl := p.(*Fit)
	state := framework.NewCycleState()
	if st := pl.PreFilter(ctx, state, pod); !st.IsSuccess() {
		b.Fatal(st.Message())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if st := pl.Filter(ctx, state, pod, ni); st.IsSuccess() != wantSuccess {
			b.Fatalf("unexpected status %v %q", st.Code(), st.Message())
		}
	}
}

// BenchmarkFitFilter measures Filter (after one PreFilter) against a node with 20
// pods, for a fitting pod, one with an extended resource, and one that does not fit.
func BenchmarkFitFilter(b *testing.B) {
	var pods []*corev1.Pod
	for range 20 {
		pods = append(pods, newResourcePod(framework.Resource{MilliCPU: 100, Memory: 100 << 20}))
	}
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(&corev1.Node{Status: corev1.NodeStatus{Allocatable: makeAllocatableResources(4000, 8<<30, 110, 4, 100<<30, 0)}})

	b.Run("fits", func(b *testing.B) {
		benchmarkFitFilter(b, newResourcePod(framework.Resource{MilliCPU: 500, Memory: 1 << 30}), ni, true)
	})
	b.Run("fits-extended", func(b *testing.B) {
		benchmarkFitFilter(b, newResourcePod(framework.Resource{MilliCPU: 500, Memory: 1 << 30,
			ScalarResources: map[corev1.ResourceName]int64{extendedResourceA: 1}}), ni, true)
	})
	b.Run("insufficient-cpu", func(b *testing.B) {
		benchmarkFitFilter(b, newResourcePod(framework.Resource{MilliCPU: 3000, Memory: 1 << 30}), ni, false)
	})
}
