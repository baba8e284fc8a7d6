package defaults

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
)

// FlowSchema sets upstream's v1 default matchingPrecedence, 1000.
func FlowSchema(fs *flowcontrolv1.FlowSchema) {
	if fs.Spec.MatchingPrecedence == 0 {
		fs.Spec.MatchingPrecedence = 1000
	}
}

// PriorityLevelConfiguration sets upstream's v1 defaults: a Limited level's
// nominalConcurrencyShares 30 and lendablePercent 0, its queuing's 64 queues, hand size
// 8 and queue length limit 50; an Exempt level's shares and lendablePercent 0.
func PriorityLevelConfiguration(pl *flowcontrolv1.PriorityLevelConfiguration) {
	if l := pl.Spec.Limited; l != nil {
		if l.NominalConcurrencyShares == nil {
			l.NominalConcurrencyShares = int32Ptr(30)
		}
		if l.LendablePercent == nil {
			l.LendablePercent = int32Ptr(0)
		}
		if q := l.LimitResponse.Queuing; q != nil {
			if q.HandSize == 0 {
				q.HandSize = 8
			}
			if q.Queues == 0 {
				q.Queues = 64
			}
			if q.QueueLengthLimit == 0 {
				q.QueueLengthLimit = 50
			}
		}
	}
	if e := pl.Spec.Exempt; e != nil {
		if e.NominalConcurrencyShares == nil {
			e.NominalConcurrencyShares = int32Ptr(0)
		}
		if e.LendablePercent == nil {
			e.LendablePercent = int32Ptr(0)
		}
	}
}
