// Package bootstrap holds upstream's API Priority and Fairness configuration that every
// API server creates at start: the mandatory PriorityLevelConfigurations and FlowSchemas
// (exempt and catch-all, always restored to their fixed spec) and the suggested ones
// (system, node-high, leader-election, workload-high, workload-low, global-default and
// the FlowSchemas that lead to them, restored while their apf.kubernetes.io/autoupdate-spec
// annotation is true), and Ensure, which keeps them as upstream's config producer does.
//
// The objects are typed again here from upstream's k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap
// (v1.32); a test compares them with upstream's.
package bootstrap

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Names of the mandatory objects.
const (
	// Exempt names the exempt priority level and the FlowSchema of system:masters.
	Exempt = flowcontrolv1.PriorityLevelConfigurationNameExempt
	// CatchAll names the priority level and FlowSchema that take every request no other
	// FlowSchema matches.
	CatchAll = flowcontrolv1.PriorityLevelConfigurationNameCatchAll
)

// limited is a Limited priority level spec; queues 0 means it rejects instead of queuing.
func limited(shares, lendable, queues, handSize int32) flowcontrolv1.PriorityLevelConfigurationSpec {
	l := &flowcontrolv1.LimitedPriorityLevelConfiguration{
		NominalConcurrencyShares: ptr(shares), LendablePercent: ptr(lendable),
		LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
	}
	if queues > 0 {
		l.LimitResponse = flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
			Queuing: &flowcontrolv1.QueuingConfiguration{Queues: queues, HandSize: handSize, QueueLengthLimit: 50}}
	}
	return flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: l}
}

func ptr(v int32) *int32 { return &v }

func level(name string, spec flowcontrolv1.PriorityLevelConfigurationSpec) *flowcontrolv1.PriorityLevelConfiguration {
	return &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "true"}},
		Spec:       spec,
	}
}

// MandatoryPriorityLevelConfigurations returns fresh copies of catch-all and exempt.
func MandatoryPriorityLevelConfigurations() []*flowcontrolv1.PriorityLevelConfiguration {
	return []*flowcontrolv1.PriorityLevelConfiguration{
		level(CatchAll, limited(5, 0, 0, 0)),
		level(Exempt, flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementExempt,
			Exempt: &flowcontrolv1.ExemptPriorityLevelConfiguration{NominalConcurrencyShares: ptr(0), LendablePercent: ptr(0)}}),
	}
}

// SuggestedPriorityLevelConfigurations returns fresh copies of the suggested levels.
func SuggestedPriorityLevelConfigurations() []*flowcontrolv1.PriorityLevelConfiguration {
	return []*flowcontrolv1.PriorityLevelConfiguration{
		level("system", limited(30, 33, 64, 6)),
		level("node-high", limited(40, 25, 64, 6)),
		level("leader-election", limited(10, 0, 16, 4)),
		level("workload-high", limited(40, 50, 128, 6)),
		level("workload-low", limited(100, 90, 128, 6)),
		level("global-default", limited(20, 50, 128, 6)),
	}
}

func schema(name, level string, precedence int32, by flowcontrolv1.FlowDistinguisherMethodType, rule flowcontrolv1.PolicyRulesWithSubjects) *flowcontrolv1.FlowSchema {
	fs := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "true"}},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
			MatchingPrecedence:         precedence,
			Rules:                      []flowcontrolv1.PolicyRulesWithSubjects{rule},
		},
	}
	if by != "" {
		fs.Spec.DistinguisherMethod = &flowcontrolv1.FlowDistinguisherMethod{Type: by}
	}
	return fs
}

func groups(names ...string) []flowcontrolv1.Subject {
	out := make([]flowcontrolv1.Subject, 0, len(names))
	for _, n := range names {
		out = append(out, flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: n}})
	}
	return out
}

func users(names ...string) []flowcontrolv1.Subject {
	out := make([]flowcontrolv1.Subject, 0, len(names))
	for _, n := range names {
		out = append(out, flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: n}})
	}
	return out
}

func kubeSystemSAs(names ...string) []flowcontrolv1.Subject {
	out := make([]flowcontrolv1.Subject, 0, len(names))
	for _, n := range names {
		out = append(out, flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindServiceAccount,
			ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Name: n, Namespace: metav1.NamespaceSystem}})
	}
	return out
}

func resources(verbs, apiGroups, resources []string, clusterScope bool) flowcontrolv1.ResourcePolicyRule {
	return flowcontrolv1.ResourcePolicyRule{Verbs: verbs, APIGroups: apiGroups, Resources: resources,
		Namespaces: []string{flowcontrolv1.NamespaceEvery}, ClusterScope: clusterScope}
}

// everything is the rule pair that matches every request of the subjects.
func everything(subjects []flowcontrolv1.Subject) flowcontrolv1.PolicyRulesWithSubjects {
	all := []string{"*"}
	return flowcontrolv1.PolicyRulesWithSubjects{
		Subjects:         subjects,
		ResourceRules:    []flowcontrolv1.ResourcePolicyRule{resources(all, all, all, true)},
		NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: all, NonResourceURLs: all}},
	}
}

const (
	byUser      = flowcontrolv1.FlowDistinguisherMethodByUserType
	byNamespace = flowcontrolv1.FlowDistinguisherMethodByNamespaceType
	everyone1   = "system:unauthenticated"
	everyone2   = "system:authenticated"
	kcm         = "system:kube-controller-manager"
	scheduler   = "system:kube-scheduler"
	nodes       = "system:nodes"
)

// MandatoryFlowSchemas returns fresh copies of exempt and catch-all.
func MandatoryFlowSchemas() []*flowcontrolv1.FlowSchema {
	return []*flowcontrolv1.FlowSchema{
		schema(Exempt, Exempt, 1, "", everything(groups("system:masters"))),
		schema(CatchAll, CatchAll, 10000, byUser, everything(groups(everyone1, everyone2))),
	}
}

// SuggestedFlowSchemas returns fresh copies of the suggested FlowSchemas.
func SuggestedFlowSchemas() []*flowcontrolv1.FlowSchema {
	getCreateUpdate := []string{"get", "create", "update"}
	all := []string{"*"}
	return []*flowcontrolv1.FlowSchema{
		schema("system-nodes", "system", 500, byUser, flowcontrolv1.PolicyRulesWithSubjects{
			Subjects:         groups(nodes),
			ResourceRules:    []flowcontrolv1.ResourcePolicyRule{resources(all, all, all, true)},
			NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: all, NonResourceURLs: all}},
		}),
		schema("system-node-high", "node-high", 400, byUser, flowcontrolv1.PolicyRulesWithSubjects{
			Subjects: groups(nodes),
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{
				resources(all, []string{""}, []string{"nodes", "nodes/status"}, true),
				resources(all, []string{"coordination.k8s.io"}, []string{"leases"}, false),
			},
		}),
		schema("probes", Exempt, 2, "", flowcontrolv1.PolicyRulesWithSubjects{
			Subjects:         groups(everyone1, everyone2),
			NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/readyz", "/livez"}}},
		}),
		schema("system-leader-election", "leader-election", 100, byUser, flowcontrolv1.PolicyRulesWithSubjects{
			Subjects:      append(users(kcm, scheduler), kubeSystemSAs("*")...),
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{resources(getCreateUpdate, []string{"coordination.k8s.io"}, []string{"leases"}, false)},
		}),
		schema("workload-leader-election", "leader-election", 200, byUser, flowcontrolv1.PolicyRulesWithSubjects{
			Subjects: kubeSystemSAs("*"),
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{
				resources(getCreateUpdate, []string{""}, []string{"endpoints", "configmaps"}, false),
				resources(getCreateUpdate, []string{"coordination.k8s.io"}, []string{"leases"}, false),
			},
		}),
		schema("endpoint-controller", "workload-high", 150, byUser, flowcontrolv1.PolicyRulesWithSubjects{
			Subjects:      append(users(kcm), kubeSystemSAs("endpoint-controller", "endpointslicemirroring-controller")...),
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{resources(getCreateUpdate, []string{""}, []string{"endpoints"}, false)},
		}),
		schema("kube-controller-manager", "workload-high", 800, byNamespace, everything(users(kcm))),
		schema("kube-scheduler", "workload-high", 800, byNamespace, everything(users(scheduler))),
		schema("kube-system-service-accounts", "workload-high", 900, byNamespace, everything(kubeSystemSAs("*"))),
		schema("service-accounts", "workload-low", 9000, byUser, everything(groups("system:serviceaccounts"))),
		schema("global-default", "global-default", 9900, byUser, everything(groups(everyone1, everyone2))),
	}
}

// MandatoryFlowSchema returns the mandatory FlowSchema of that name, if it is one.
func MandatoryFlowSchema(name string) (*flowcontrolv1.FlowSchema, bool) {
	for _, fs := range MandatoryFlowSchemas() {
		if fs.Name == name {
			return fs, true
		}
	}
	return nil, false
}

// MandatoryPriorityLevelConfiguration returns the mandatory priority level of that name,
// if it is one.
func MandatoryPriorityLevelConfiguration(name string) (*flowcontrolv1.PriorityLevelConfiguration, bool) {
	for _, pl := range MandatoryPriorityLevelConfigurations() {
		if pl.Name == name {
			return pl, true
		}
	}
	return nil, false
}
