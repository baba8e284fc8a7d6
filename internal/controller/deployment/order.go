package deployment

import (
	appsv1 "k8s.io/api/apps/v1"
)

// The orders in which the controller visits ReplicaSets (upstream's
// controller.ReplicaSetsBy* and deploymentutil.ReplicaSetsByRevision).

// byCreationTimestamp orders oldest first, ties by name.
type byCreationTimestamp []*appsv1.ReplicaSet

func (o byCreationTimestamp) Len() int      { return len(o) }
func (o byCreationTimestamp) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o byCreationTimestamp) Less(i, j int) bool {
	if o[i].CreationTimestamp.Equal(&o[j].CreationTimestamp) {
		return o[i].Name < o[j].Name
	}
	return o[i].CreationTimestamp.Before(&o[j].CreationTimestamp)
}

// bySizeOlder orders larger first, and among equal sizes older first: the
// order in which a scale-down takes replicas away.
type bySizeOlder []*appsv1.ReplicaSet

func (o bySizeOlder) Len() int      { return len(o) }
func (o bySizeOlder) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o bySizeOlder) Less(i, j int) bool {
	if *o[i].Spec.Replicas == *o[j].Spec.Replicas {
		return byCreationTimestamp(o).Less(i, j)
	}
	return *o[i].Spec.Replicas > *o[j].Spec.Replicas
}

// bySizeNewer orders larger first, and among equal sizes newer first: the
// order in which a scale-up hands out replicas.
type bySizeNewer []*appsv1.ReplicaSet

func (o bySizeNewer) Len() int      { return len(o) }
func (o bySizeNewer) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o bySizeNewer) Less(i, j int) bool {
	if *o[i].Spec.Replicas == *o[j].Spec.Replicas {
		return byCreationTimestamp(o).Less(j, i)
	}
	return *o[i].Spec.Replicas > *o[j].Spec.Replicas
}

// byRevision orders by the revision annotation, lowest first (a missing or
// broken annotation counts as 0), ties by creation time.
type byRevision []*appsv1.ReplicaSet

func (o byRevision) Len() int      { return len(o) }
func (o byRevision) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o byRevision) Less(i, j int) bool {
	r1, _ := revision(o[i])
	r2, _ := revision(o[j])
	if r1 == r2 {
		return byCreationTimestamp(o).Less(i, j)
	}
	return r1 < r2
}
