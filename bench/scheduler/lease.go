package main

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// The cluster scheduler's Lease (kubette's and upstream's default).
const (
	schedulerLeaseNamespace = "kube-system"
	schedulerLeaseName      = "kube-scheduler"
)

// leaseStepDown is how long the cluster's scheduler may keep scheduling after the bench
// took its Lease: until its renewal deadline (10 s in kubette and upstream) passes.
const leaseStepDown = 15 * time.Second

// holdSchedulerLease makes the bench the holder of the cluster scheduler's Lease for an
// hour, so that the scheduler steps down and no instance takes over, and waits until the
// old leader must have stopped. The cluster's scheduler must be leader-elected (kubette
// up's is; it campaigns again once the Lease is free).
func holdSchedulerLease(ctx context.Context, cs kubernetes.Interface, holder string) error {
	leases := cs.CoordinationV1().Leases(schedulerLeaseNamespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(ctx, schedulerLeaseName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("the cluster scheduler's Lease %s/%s (is its scheduler leader-elected?): %w", schedulerLeaseNamespace, schedulerLeaseName, err)
		}
		now := metav1.NowMicro()
		l.Spec = coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr(int32(3600)), AcquireTime: &now, RenewTime: &now}
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("take the scheduler's Lease: %w", err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(leaseStepDown):
		return nil
	}
}

// releaseSchedulerLease frees the Lease: the cluster's scheduler acquires it at its next
// retry (every 2 s) and schedules the pods created meanwhile.
func releaseSchedulerLease(ctx context.Context, cs kubernetes.Interface) error {
	leases := cs.CoordinationV1().Leases(schedulerLeaseNamespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(ctx, schedulerLeaseName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("release the scheduler's Lease: %w", err)
		}
		past := metav1.NewMicroTime(time.Unix(0, 0))
		l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr(""), LeaseDurationSeconds: ptr(int32(1)), RenewTime: &past}
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
}

func ptr[T any](v T) *T { return &v }
