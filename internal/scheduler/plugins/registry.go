// Package plugins holds the in-tree scheduler plugins, one package each, and the
// registry that names them: NewInTreeRegistry maps every plugin name to its
// constructor, and DefaultProfile lists the plugins the scheduler runs by default,
// in upstream's order and with upstream's score weights.
package plugins

import (
	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/plugins/defaultbinder"
	"github.com/kubette/kubette/internal/scheduler/plugins/defaultpreemption"
	"github.com/kubette/kubette/internal/scheduler/plugins/imagelocality"
	"github.com/kubette/kubette/internal/scheduler/plugins/interpodaffinity"
	"github.com/kubette/kubette/internal/scheduler/plugins/nodeaffinity"
	"github.com/kubette/kubette/internal/scheduler/plugins/nodename"
	"github.com/kubette/kubette/internal/scheduler/plugins/nodeports"
	"github.com/kubette/kubette/internal/scheduler/plugins/noderesources"
	"github.com/kubette/kubette/internal/scheduler/plugins/nodeunschedulable"
	"github.com/kubette/kubette/internal/scheduler/plugins/podtopologyspread"
	"github.com/kubette/kubette/internal/scheduler/plugins/schedulinggates"
	"github.com/kubette/kubette/internal/scheduler/plugins/tainttoleration"
	"github.com/kubette/kubette/internal/scheduler/plugins/volumebinding"
)

// PluginConfig enables one plugin in a scheduling profile: at every extension point
// it implements, in the order of the profile.
type PluginConfig struct {
	// Name is the plugin's registered name.
	Name string
	// Weight multiplies the plugin's normalised scores (0 means 1). Ignored for
	// plugins that do not score.
	Weight int64
	// Args is passed to the plugin's constructor (nil for defaults).
	Args any
}

// NewInTreeRegistry returns the constructors of the in-tree plugins by name.
func NewInTreeRegistry() framework.Registry {
	return framework.Registry{
		nodeunschedulable.Name:               nodeunschedulable.New,
		nodename.Name:                        nodename.New,
		tainttoleration.Name:                 tainttoleration.New,
		nodeaffinity.Name:                    nodeaffinity.New,
		nodeports.Name:                       nodeports.New,
		noderesources.NameFit:                noderesources.NewFit,
		volumebinding.Name:                   volumebinding.New,
		podtopologyspread.Name:               podtopologyspread.New,
		interpodaffinity.Name:                interpodaffinity.New,
		noderesources.NameBalancedAllocation: noderesources.NewBalancedAllocation,
		imagelocality.Name:                   imagelocality.New,
		defaultpreemption.Name:               defaultpreemption.New,
		defaultbinder.Name:                   defaultbinder.New,
		schedulinggates.Name:                 schedulinggates.New,
	}
}

// DefaultProfile returns upstream's default plugins in upstream's order, with its
// score weights: TaintToleration 3, NodeAffinity 2, PodTopologySpread 2,
// InterPodAffinity 2, NodeResourcesFit 1, NodeResourcesBalancedAllocation 1,
// ImageLocality 1; VolumeBinding (after NodeResourcesFit, as upstream) places
// and binds pods' claims and does not score; DefaultPreemption is the
// PostFilter; DefaultBinder binds; SchedulingGates holds back pods with
// scheduling gates (PreEnqueue).
func DefaultProfile() []PluginConfig {
	return []PluginConfig{
		{Name: nodeunschedulable.Name},
		{Name: nodename.Name},
		{Name: tainttoleration.Name, Weight: 3},
		{Name: nodeaffinity.Name, Weight: 2},
		{Name: nodeports.Name},
		{Name: noderesources.NameFit, Weight: 1},
		{Name: volumebinding.Name},
		{Name: podtopologyspread.Name, Weight: 2},
		{Name: interpodaffinity.Name, Weight: 2},
		{Name: noderesources.NameBalancedAllocation, Weight: 1},
		{Name: imagelocality.Name, Weight: 1},
		{Name: defaultpreemption.Name},
		{Name: defaultbinder.Name},
		{Name: schedulinggates.Name},
	}
}
