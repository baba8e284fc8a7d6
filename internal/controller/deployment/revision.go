package deployment

import (
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The annotations that record a Deployment's rollout history on its
// ReplicaSets, read back by kubectl rollout history/undo.
const (
	// revisionAnnotation is the rollout sequence number of a ReplicaSet, copied
	// to its Deployment when the ReplicaSet is the new one.
	revisionAnnotation = "deployment.kubernetes.io/revision"
	// revisionHistoryAnnotation lists the revisions a ReplicaSet had before
	// (when a rollback made an old template current again).
	revisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	// desiredReplicasAnnotation is the Deployment's spec.replicas when the
	// ReplicaSet was last sized; it tells scaling events from rollout steps.
	desiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	// maxReplicasAnnotation is spec.replicas + maxSurge when the ReplicaSet was
	// last sized: the base of proportional scaling.
	maxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"
	// rollbackToAnnotation is the deprecated extensions/v1beta1 rollback
	// request; never copied to ReplicaSets.
	rollbackToAnnotation = "deprecated.deployment.rollback.to"
	// maxRevisionHistoryChars bounds the revision-history annotation.
	maxRevisionHistoryChars = 2000
)

// skipCopyAnnotation reports whether a Deployment annotation stays off its
// ReplicaSets: the client-side apply record and the controller's own ones.
func skipCopyAnnotation(key string) bool {
	switch key {
	case corev1.LastAppliedConfigAnnotation, revisionAnnotation, revisionHistoryAnnotation,
		desiredReplicasAnnotation, maxReplicasAnnotation, rollbackToAnnotation:
		return true
	}
	return false
}

// revision parses rs's revision annotation; none is revision 0.
func revision(rs *appsv1.ReplicaSet) (int64, error) {
	v, ok := rs.Annotations[revisionAnnotation]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("replica set %s/%s: bad %s annotation: %w", rs.Namespace, rs.Name, revisionAnnotation, err)
	}
	return n, nil
}

// maxRevision is the highest revision among rss; unparsable ones are skipped.
func maxRevision(log *slog.Logger, rss []*appsv1.ReplicaSet) int64 {
	var highest int64
	for _, rs := range rss {
		v, err := revision(rs)
		if err != nil {
			log.Debug("Skipping a replica set whose revision cannot be parsed", "err", err)
			continue
		}
		highest = max(highest, v)
	}
	return highest
}

// setDeploymentRevision sets d's revision annotation, reporting a change.
func setDeploymentRevision(d *appsv1.Deployment, rev string) bool {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	if d.Annotations[revisionAnnotation] == rev {
		return false
	}
	d.Annotations[revisionAnnotation] = rev
	return true
}

// copyDeploymentAnnotations copies d's annotations onto rs, except those of
// skipCopyAnnotation, reporting a change. Annotations rs has that d lacks stay.
func copyDeploymentAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	for k, v := range d.Annotations {
		if skipCopyAnnotation(k) || rs.Annotations[k] == v {
			continue
		}
		rs.Annotations[k] = v
		changed = true
	}
	return changed
}

// setNewReplicaSetAnnotations brings the annotations of d's new ReplicaSet up
// to date, reporting a change: d's own annotations (change-cause among them),
// the revision raised to newRevision when lower (the revision it had goes to the
// revision history, bounded to historyChars), and for a ReplicaSet about to be
// created (!exists) the replica annotations.
func setNewReplicaSetAnnotations(log *slog.Logger, d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision string, exists bool, historyChars int) bool {
	changed := copyDeploymentAnnotations(d, rs)
	oldRevision, had := rs.Annotations[revisionAnnotation]
	oldRev, err := strconv.ParseInt(oldRevision, 10, 64)
	if err != nil {
		if oldRevision != "" {
			log.Info("Not updating the revision of a replica set whose revision is not a number", "replicaSet", rs.Namespace+"/"+rs.Name, "err", err)
			return false
		}
		oldRev = 0
	}
	newRev, err := strconv.ParseInt(newRevision, 10, 64)
	if err != nil {
		log.Info("Not updating a replica set revision to a value that is not a number", "replicaSet", rs.Namespace+"/"+rs.Name, "err", err)
		return false
	}
	if oldRev < newRev {
		rs.Annotations[revisionAnnotation] = newRevision
		changed = true
	}
	if had && oldRev < newRev {
		history := rs.Annotations[revisionHistoryAnnotation]
		revs := strings.Split(history, ",")
		if revs[0] == "" {
			rs.Annotations[revisionHistoryAnnotation] = oldRevision
		} else {
			total := len(history) + len(oldRevision) + 1
			start := 0
			for total > historyChars && start < len(revs) {
				total -= len(revs[start]) + 1
				start++
			}
			if total <= historyChars {
				revs = append(revs[start:], oldRevision)
				rs.Annotations[revisionHistoryAnnotation] = strings.Join(revs, ",")
			} else {
				log.Info("Not appending to the revision history: its length limit is reached", "limit", historyChars)
			}
		}
	}
	if !exists && setReplicasAnnotations(rs, *d.Spec.Replicas, *d.Spec.Replicas+maxSurge(d)) {
		changed = true
	}
	return changed
}

// setReplicasAnnotations records the desired and max replicas on rs,
// reporting a change.
func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	if s := strconv.Itoa(int(desired)); rs.Annotations[desiredReplicasAnnotation] != s {
		rs.Annotations[desiredReplicasAnnotation] = s
		changed = true
	}
	if s := strconv.Itoa(int(maxReplicas)); rs.Annotations[maxReplicasAnnotation] != s {
		rs.Annotations[maxReplicasAnnotation] = s
		changed = true
	}
	return changed
}

// replicasAnnotationsNeedUpdate reports whether rs lacks the given desired and
// max replicas annotations.
func replicasAnnotationsNeedUpdate(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	if rs.Annotations == nil {
		return true
	}
	return rs.Annotations[desiredReplicasAnnotation] != strconv.Itoa(int(desired)) ||
		rs.Annotations[maxReplicasAnnotation] != strconv.Itoa(int(maxReplicas))
}

// nonNegativeInt32Annotation reads an annotation holding a number in
// [0, MaxInt32]; ok is false when it is missing or invalid.
func nonNegativeInt32Annotation(rs *appsv1.ReplicaSet, key string) (value int32, ok bool, err error) {
	v, found := rs.Annotations[key]
	if !found {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, false, fmt.Errorf("annotation %s of replica set %s/%s: %w", key, rs.Namespace, rs.Name, err)
	}
	if n > math.MaxInt32 {
		return 0, false, fmt.Errorf("annotation %s of replica set %s/%s: value %d is out of range (0-%d)", key, rs.Namespace, rs.Name, n, math.MaxInt32)
	}
	return int32(n), true, nil
}

// nonNegativeInt32AnnotationVerbose is nonNegativeInt32Annotation that logs
// an invalid value instead of returning the error.
func nonNegativeInt32AnnotationVerbose(log *slog.Logger, rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, ok, err := nonNegativeInt32Annotation(rs, key)
	if err != nil {
		log.Debug("Cannot read a replica set annotation", "err", err)
	}
	return v, ok
}

// findNewReplicaSet returns the ReplicaSet whose template equals d's (ignoring
// the hash label), the oldest one if several do; nil when there is none. It
// sorts rsList by creation time.
func findNewReplicaSet(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	sort.Sort(byCreationTimestamp(rsList))
	for _, rs := range rsList {
		if equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// findOldReplicaSets returns the ReplicaSets other than the new one: those
// still with replicas, and all of them.
func findOldReplicaSets(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) (withReplicas, all []*appsv1.ReplicaSet) {
	newRS := findNewReplicaSet(d, rsList)
	for _, rs := range rsList {
		if newRS != nil && rs.UID == newRS.UID {
			continue
		}
		all = append(all, rs)
		if *rs.Spec.Replicas != 0 {
			withReplicas = append(withReplicas, rs)
		}
	}
	return withReplicas, all
}
