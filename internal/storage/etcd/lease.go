package etcd

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Lease reuse, as upstream's API server: keys written within a window share one lease,
// which is granted for the requested TTL plus that window, so that no key lives shorter
// than it asked and etcd grants one lease per window instead of one per write.
const (
	// leaseReuseMax caps the reuse window (upstream's leaseReuseDurationSeconds).
	leaseReuseMax = 60 * time.Second
	// leaseReusePercent is the reuse window as a share of the TTL, when smaller than the cap.
	leaseReusePercent = 0.05
	// leaseMaxKeys is how many writes one lease takes before a new one is granted
	// (upstream's LeaseMaxObjectCount): expiring a lease deletes its keys in one go.
	leaseMaxKeys = 1000
)

// grantFunc asks etcd for a lease of ttl seconds and returns its ID and the TTL etcd
// granted, which may be longer (etcd's minimum lease TTL).
type grantFunc func(ctx context.Context, ttlSeconds int64) (clientv3.LeaseID, int64, error)

// LeaseStats counts what the Store's lease manager did.
type LeaseStats struct {
	// Grants is how many leases were granted by etcd.
	Grants int64
	// Reuses is how many writes used a lease granted for an earlier write.
	Reuses int64
}

// leaseManager hands out etcd leases for writes with a TTL, reusing the last lease while
// it expires late enough for the new write and not too late. It is safe for concurrent use.
type leaseManager struct {
	grant   grantFunc
	now     func() time.Time
	maxKeys int64

	// mu is held across a grant, so that concurrent writes wait for one new lease
	// instead of each granting their own.
	mu sync.Mutex
	// prev is the lease last granted; prevExpiry when it expires at the earliest
	// (measured from before the grant request); prevKeys how many writes it was given to.
	prev       clientv3.LeaseID
	prevExpiry time.Time
	prevKeys   int64
	stats      LeaseStats
}

func newLeaseManager(grant grantFunc, now func() time.Time) *leaseManager {
	return &leaseManager{grant: grant, now: now, maxKeys: leaseMaxKeys}
}

// leaseTimes are a TTL rounded up to whole seconds, as etcd counts, and the reuse window
// that goes with it: min(60 s, 5 % of the TTL), in whole seconds too (0 below 20 s).
func leaseTimes(ttl time.Duration) (ttlSeconds, windowSeconds int64) {
	ttlSeconds = int64((ttl + time.Second - 1) / time.Second)
	windowSeconds = min(int64(leaseReuseMax/time.Second), int64(float64(ttlSeconds)*leaseReusePercent))
	return ttlSeconds, windowSeconds
}

// lease returns a lease under which a key lives at least ttl (a positive duration) from now.
func (l *leaseManager) lease(ctx context.Context, ttl time.Duration) (clientv3.LeaseID, error) {
	ttlSeconds, windowSeconds := leaseTimes(ttl)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	// The previous lease does if it outlives the TTL (it was measured from before its
	// grant, so it lasts at least until prevExpiry), but not by more than the window.
	if l.prev != clientv3.NoLease && l.prevKeys < l.maxKeys &&
		now.Add(time.Duration(ttlSeconds)*time.Second).Before(l.prevExpiry) &&
		!now.Add(time.Duration(ttlSeconds+windowSeconds)*time.Second).Before(l.prevExpiry) {
		l.prevKeys++
		l.stats.Reuses++
		return l.prev, nil
	}
	secs := ttlSeconds + windowSeconds
	id, granted, err := l.grant(ctx, secs)
	if err != nil {
		return clientv3.NoLease, fmt.Errorf("grant a lease of %d s: %w", secs, err)
	}
	l.stats.Grants++
	l.prev, l.prevExpiry, l.prevKeys = id, now.Add(time.Duration(max(secs, granted))*time.Second), 1
	return id, nil
}

// forget drops the cached lease if it is id, after etcd said it no longer exists.
func (l *leaseManager) forget(id clientv3.LeaseID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.prev == id {
		l.prev, l.prevKeys = clientv3.NoLease, 0
	}
}

// Stats returns the counts so far.
func (l *leaseManager) Stats() LeaseStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}
