// Package affinitymatch parses and matches the selectors that scheduling
// constraints are written in: node selectors (spec.nodeSelector and node
// affinity, required and preferred) and pod affinity terms (label selector,
// namespaces and namespaceSelector, topology key).
//
// It reproduces the semantics of upstream's
// k8s.io/component-helpers/scheduling/corev1/nodeaffinity and of the affinity
// terms that kube-scheduler parses into its PodInfo, without depending on
// either. Parsing happens once per pod (per scheduling cycle for the incoming
// pod, once per object for existing pods through a TermCache) so that the
// Filter and Score calls that run per node only match.
package affinitymatch
