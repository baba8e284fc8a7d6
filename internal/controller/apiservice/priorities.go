package apiservice

import "k8s.io/apimachinery/pkg/runtime/schema"

// Priority is the place of a group and of a version within its group in discovery.
type Priority struct{ Group, Version int32 }

// builtinPriorities are upstream kube-apiserver's APIService priorities of its
// built-in group-versions (the generic control plane's table and kube-apiserver's
// additions): a served group-version missing here gets no APIService, as upstream.
var builtinPriorities = map[schema.GroupVersion]Priority{
	{Group: "", Version: "v1"}:                                {18000, 1},
	{Group: "apps", Version: "v1"}:                            {17800, 15},
	{Group: "events.k8s.io", Version: "v1"}:                   {17750, 15},
	{Group: "authentication.k8s.io", Version: "v1"}:           {17700, 15},
	{Group: "authorization.k8s.io", Version: "v1"}:            {17600, 15},
	{Group: "autoscaling", Version: "v1"}:                     {17500, 15},
	{Group: "autoscaling", Version: "v2"}:                     {17500, 30},
	{Group: "batch", Version: "v1"}:                           {17400, 15},
	{Group: "certificates.k8s.io", Version: "v1"}:             {17300, 15},
	{Group: "networking.k8s.io", Version: "v1"}:               {17200, 15},
	{Group: "policy", Version: "v1"}:                          {17100, 15},
	{Group: "rbac.authorization.k8s.io", Version: "v1"}:       {17000, 15},
	{Group: "storage.k8s.io", Version: "v1"}:                  {16800, 15},
	{Group: "apiextensions.k8s.io", Version: "v1"}:            {16700, 15},
	{Group: "admissionregistration.k8s.io", Version: "v1"}:    {16700, 15},
	{Group: "scheduling.k8s.io", Version: "v1"}:               {16600, 15},
	{Group: "coordination.k8s.io", Version: "v1"}:             {16500, 15},
	{Group: "node.k8s.io", Version: "v1"}:                     {16300, 15},
	{Group: "discovery.k8s.io", Version: "v1"}:                {16200, 15},
	{Group: "resource.k8s.io", Version: "v1beta2"}:            {16200, 15},
	{Group: "flowcontrol.apiserver.k8s.io", Version: "v1"}:    {16100, 21},
	{Group: "internal.apiserver.k8s.io", Version: "v1alpha1"}: {16000, 9},
	{Group: "storagemigration.k8s.io", Version: "v1beta1"}:    {15800, 9},
	// Not kube-apiserver's: the priorities of metrics-server's APIService, whose API
	// kubette serves itself (see ReplaceableByExtension).
	{Group: "metrics.k8s.io", Version: "v1beta1"}: {100, 100},
}

// replaceable are the built-in group-versions that upstream serves through an
// extension API server and kubette serves itself as a stand-in.
var replaceable = map[schema.GroupVersion]bool{
	{Group: "metrics.k8s.io", Version: "v1beta1"}: true, // metrics-server's resource metrics API
}

// ReplaceableByExtension reports whether gv is served locally only until a user
// points its APIService at an extension server (installs upstream's metrics-server
// for metrics.k8s.io/v1beta1): such an APIService is the user's from then on, never
// repaired at start as the other built-in ones are.
func ReplaceableByExtension(gv schema.GroupVersion) bool { return replaceable[gv] }

// BuiltinPriority returns upstream's priority of a built-in group-version.
func BuiltinPriority(gv schema.GroupVersion) (Priority, bool) {
	p, ok := builtinPriorities[gv]
	return p, ok
}

// customResourcePriority is the priority upstream's CRD registration controller gives
// every group-version of a CustomResourceDefinition.
var customResourcePriority = Priority{Group: 1000, Version: 100}
