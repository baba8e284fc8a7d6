package noderesources

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// ScoringStrategyType names how NodeResourcesFit scores nodes.
type ScoringStrategyType string

// The scoring strategies, as upstream's NodeResourcesFitArgs.
const (
	// LeastAllocated favours nodes with the most free resources (the default).
	LeastAllocated ScoringStrategyType = "LeastAllocated"
	// MostAllocated favours the fullest nodes (bin packing).
	MostAllocated ScoringStrategyType = "MostAllocated"
	// RequestedToCapacityRatio scores utilisation through a configurable shape.
	RequestedToCapacityRatio ScoringStrategyType = "RequestedToCapacityRatio"
)

// Limits of the configuration, as upstream.
const (
	// MaxResourceWeight is the largest weight of a scored resource.
	MaxResourceWeight = 100
	// MaxCustomPriorityScore is the largest score of a RequestedToCapacityRatio shape point.
	MaxCustomPriorityScore = 10
	// MaxUtilization is the largest utilisation of a shape point (percent).
	MaxUtilization = 100
)

// ResourceSpec is a resource the scorer looks at, with its weight.
type ResourceSpec struct {
	// Name is the resource name, e.g. "cpu", "memory" or "example.com/gpu".
	Name string
	// Weight is in [1, MaxResourceWeight]; 0 means 1.
	Weight int64
}

// UtilizationShapePoint is one point of the RequestedToCapacityRatio function.
type UtilizationShapePoint struct {
	// Utilization is in [0, MaxUtilization] percent.
	Utilization int32
	// Score is in [0, MaxCustomPriorityScore]; it is scaled to MaxNodeScore.
	Score int32
}

// RequestedToCapacityRatioParam configures the RequestedToCapacityRatio strategy.
type RequestedToCapacityRatioParam struct {
	// Shape is a piecewise linear function of utilisation, with strictly
	// increasing utilisations. Empty means {0: 10, 100: 0} (like LeastAllocated).
	Shape []UtilizationShapePoint
}

// ScoringStrategy selects and configures the scorer of NodeResourcesFit.
type ScoringStrategy struct {
	// Type is the strategy; empty means LeastAllocated.
	Type ScoringStrategyType
	// Resources are the scored resources; empty means cpu and memory with weight 1.
	Resources []ResourceSpec
	// RequestedToCapacityRatio configures that strategy (nil for its default shape).
	RequestedToCapacityRatio *RequestedToCapacityRatioParam
}

// FitArgs configures NodeResourcesFit. The zero value is upstream's default.
type FitArgs struct {
	// IgnoredResources are extended resources Filter does not check.
	IgnoredResources []string
	// IgnoredResourceGroups are prefixes (the part before "/") of extended
	// resources Filter does not check, e.g. "example.com".
	IgnoredResourceGroups []string
	// ScoringStrategy is nil for LeastAllocated over cpu and memory.
	ScoringStrategy *ScoringStrategy
}

// BalancedAllocationArgs configures NodeResourcesBalancedAllocation.
type BalancedAllocationArgs struct {
	// Resources are the balanced resources; empty means cpu and memory. Weights
	// must be 1 (or 0, meaning 1), as upstream.
	Resources []ResourceSpec
}

// defaultResources is what both plugins score when not told otherwise.
func defaultResources() []ResourceSpec {
	return []ResourceSpec{{Name: string(corev1.ResourceCPU), Weight: 1}, {Name: string(corev1.ResourceMemory), Weight: 1}}
}

// defaultShape is upstream's default RequestedToCapacityRatio shape.
func defaultShape() []UtilizationShapePoint {
	return []UtilizationShapePoint{{Utilization: 0, Score: MaxCustomPriorityScore}, {Utilization: MaxUtilization, Score: 0}}
}

// fitArgs turns the args given to NewFit into a defaulted, validated FitArgs.
func fitArgs(args any) (FitArgs, error) {
	var a FitArgs
	switch v := args.(type) {
	case nil:
	case FitArgs:
		a = v
	case *FitArgs:
		if v != nil {
			a = *v
		}
	default:
		return a, fmt.Errorf("%s: want args of type FitArgs, got %T", NameFit, args)
	}
	s := ScoringStrategy{Type: LeastAllocated}
	if a.ScoringStrategy != nil {
		s = *a.ScoringStrategy
	}
	if s.Type == "" {
		s.Type = LeastAllocated
	}
	var err error
	if s.Resources, err = defaultedResources(s.Resources, false); err != nil {
		return a, fmt.Errorf("%s: scoringStrategy.resources: %w", NameFit, err)
	}
	switch s.Type {
	case LeastAllocated, MostAllocated:
	case RequestedToCapacityRatio:
		p := RequestedToCapacityRatioParam{}
		if s.RequestedToCapacityRatio != nil {
			p = *s.RequestedToCapacityRatio
		}
		if len(p.Shape) == 0 {
			p.Shape = defaultShape()
		}
		if err := validateShape(p.Shape); err != nil {
			return a, fmt.Errorf("%s: scoringStrategy.requestedToCapacityRatio.shape: %w", NameFit, err)
		}
		s.RequestedToCapacityRatio = &p
	default:
		return a, fmt.Errorf("%s: scoring strategy %q is not supported", NameFit, s.Type)
	}
	a.ScoringStrategy = &s
	return a, nil
}

// balancedAllocationArgs turns the args given to NewBalancedAllocation into
// defaulted, validated BalancedAllocationArgs.
func balancedAllocationArgs(args any) (BalancedAllocationArgs, error) {
	var a BalancedAllocationArgs
	switch v := args.(type) {
	case nil:
	case BalancedAllocationArgs:
		a = v
	case *BalancedAllocationArgs:
		if v != nil {
			a = *v
		}
	default:
		return a, fmt.Errorf("%s: want args of type BalancedAllocationArgs, got %T", NameBalancedAllocation, args)
	}
	var err error
	if a.Resources, err = defaultedResources(a.Resources, true); err != nil {
		return a, fmt.Errorf("%s: resources: %w", NameBalancedAllocation, err)
	}
	return a, nil
}

// defaultedResources copies resources, filling the defaults (cpu and memory when
// empty, weight 1 for 0), and checks names are unique and weights in range (or
// exactly 1 when unitWeight).
func defaultedResources(in []ResourceSpec, unitWeight bool) ([]ResourceSpec, error) {
	if len(in) == 0 {
		return defaultResources(), nil
	}
	out := make([]ResourceSpec, len(in))
	seen := sets.New[string]()
	var errs []error
	for i, r := range in {
		if r.Weight == 0 {
			r.Weight = 1
		}
		switch {
		case r.Name == "":
			errs = append(errs, fmt.Errorf("[%d].name: must not be empty", i))
		case seen.Has(r.Name):
			errs = append(errs, fmt.Errorf("[%d].name: duplicate %q", i, r.Name))
		}
		seen.Insert(r.Name)
		if unitWeight && r.Weight != 1 {
			errs = append(errs, fmt.Errorf("[%d].weight: %d: must be 1", i, r.Weight))
		} else if r.Weight < 1 || r.Weight > MaxResourceWeight {
			errs = append(errs, fmt.Errorf("[%d].weight: %d: not in valid range [1, %d]", i, r.Weight, MaxResourceWeight))
		}
		out[i] = r
	}
	return out, errors.Join(errs...)
}

// validateShape checks the points are in range with strictly increasing utilisation.
func validateShape(shape []UtilizationShapePoint) error {
	var errs []error
	for i, p := range shape {
		if p.Utilization < 0 || p.Utilization > MaxUtilization {
			errs = append(errs, fmt.Errorf("[%d].utilization: %d: not in valid range [0, %d]", i, p.Utilization, MaxUtilization))
		} else if i > 0 && p.Utilization <= shape[i-1].Utilization {
			errs = append(errs, fmt.Errorf("[%d].utilization: %d: utilization values must be sorted in increasing order", i, p.Utilization))
		}
		if p.Score < 0 || p.Score > MaxCustomPriorityScore {
			errs = append(errs, fmt.Errorf("[%d].score: %d: not in valid range [0, %d]", i, p.Score, MaxCustomPriorityScore))
		}
	}
	return errors.Join(errs...)
}
