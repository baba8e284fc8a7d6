// Package etcd implements storage.Store on top of etcd's v3 API, and can run
// an embedded single-member etcd server for a self-contained kubette.
//
// Keys are stored verbatim; an object's revision is its etcd mod revision.
// Creates, updates and deletes are single transactions that compare the key's
// create or mod revision, so compare-and-swap needs no extra round trip.
package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/kubette/kubette/internal/storage"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Store is a storage.Store backed by an etcd cluster. It is safe for
// concurrent use.
type Store struct {
	client     *clientv3.Client
	ownsClient bool
	// closed is cancelled by Close; it stops the Store's watch goroutines.
	closed context.Context
	close  context.CancelFunc
	// leases hands out the leases of writes with a TTL.
	leases *leaseManager
	// kv, when set, is the embedded server's KV service (quota check, request
	// checks, then the server) that Create and Update call with a request they
	// build themselves: clientv3's Op and Txn builders copied the value and every
	// compare and op once more on their way to the same call.
	kv pb.KVServer
}

var (
	_ storage.Store     = (*Store)(nil)
	_ storage.Compactor = (*Store)(nil)
)

// ErrClosed is returned (wrapped) by the methods of a Store after Close.
var ErrClosed = errors.New("etcd store is closed")

// Option configures a Store built by New.
type Option func(*Store)

// OwnClient makes the Store close its client when the Store is closed.
func OwnClient() Option {
	return func(s *Store) { s.ownsClient = true }
}

// New returns a Store that talks to etcd through client. Unless the OwnClient
// option is given, the caller keeps ownership of client and Close leaves it open.
func New(client *clientv3.Client, opts ...Option) *Store {
	closed, cancel := context.WithCancel(context.Background())
	s := &Store{client: client, closed: closed, close: cancel}
	s.leases = newLeaseManager(s.grantLease, time.Now)
	for _, opt := range opts {
		opt(s)
	}
	return s
}

// Client settings used by Dial and Embedded.Client.
const (
	dialKeepAliveTime    = 30 * time.Second
	dialKeepAliveTimeout = 10 * time.Second
	dialTimeout          = 20 * time.Second
)

// Dial connects to the etcd cluster at endpoints (TLS when tlsConfig is non-nil),
// checks that it answers before ctx is done, and returns a Store that owns the
// connection: Close closes it. The client does not log: every failure reaches
// the caller as an error.
func Dial(ctx context.Context, endpoints []string, tlsConfig *tls.Config) (*Store, error) {
	client, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		TLS:                  tlsConfig,
		DialTimeout:          dialTimeout,
		DialKeepAliveTime:    dialKeepAliveTime,
		DialKeepAliveTimeout: dialKeepAliveTimeout,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd dial %v: %w", endpoints, err)
	}
	s := New(client, OwnClient())
	if _, err := s.CurrentRevision(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("etcd dial %v: %w", endpoints, err)
	}
	return s, nil
}

// Client returns the etcd client the Store uses.
func (s *Store) Client() *clientv3.Client { return s.client }

// Close stops the Store's watches and, when the Store owns its client, closes it.
func (s *Store) Close() error {
	s.close()
	if !s.ownsClient {
		return nil
	}
	if err := s.client.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("etcd close: %w", err)
	}
	return nil
}

// Get reads one key.
func (s *Store) Get(ctx context.Context, key string) (storage.KeyValue, error) {
	if err := s.usable(); err != nil {
		return storage.KeyValue{}, fmt.Errorf("etcd get %q: %w", key, err)
	}
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return storage.KeyValue{}, fmt.Errorf("etcd get %q: %w", key, translateError(err))
	}
	if len(resp.Kvs) == 0 {
		return storage.KeyValue{}, fmt.Errorf("etcd get %q: %w", key, storage.ErrNotFound)
	}
	return toKeyValue(resp.Kvs[0]), nil
}

// List reads the keys under prefix in key order, optionally at an older
// revision, from a start key, and capped at a limit.
func (s *Store) List(ctx context.Context, prefix string, opts storage.ListOptions) (storage.ListResult, error) {
	if err := s.usable(); err != nil {
		return storage.ListResult{}, fmt.Errorf("etcd list %q: %w", prefix, err)
	}
	start := prefix
	if opts.StartKey != "" {
		if !strings.HasPrefix(opts.StartKey, prefix) {
			return storage.ListResult{}, fmt.Errorf("etcd list %q: start key %q is outside the prefix", prefix, opts.StartKey)
		}
		start = opts.StartKey
	}
	ops := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix))}
	if opts.Revision > 0 {
		ops = append(ops, clientv3.WithRev(opts.Revision))
	}
	if opts.Limit > 0 {
		ops = append(ops, clientv3.WithLimit(opts.Limit))
	}
	resp, err := s.client.Get(ctx, start, ops...)
	if err != nil {
		return storage.ListResult{}, fmt.Errorf("etcd list %q: %w", prefix, translateError(err))
	}
	res := storage.ListResult{
		Items:    make([]storage.KeyValue, len(resp.Kvs)),
		Revision: resp.Header.Revision,
		More:     resp.More,
	}
	if opts.Revision > 0 {
		// The header carries the store's current revision, not the one read at.
		res.Revision = opts.Revision
	}
	for i, kv := range resp.Kvs {
		res.Items[i] = toKeyValue(kv)
	}
	if resp.More {
		res.Remaining = resp.Count - int64(len(resp.Kvs))
	}
	return res, nil
}

// Count returns the number of keys under prefix.
func (s *Store) Count(ctx context.Context, prefix string) (int64, error) {
	if err := s.usable(); err != nil {
		return 0, fmt.Errorf("etcd count %q: %w", prefix, err)
	}
	resp, err := s.client.Get(ctx, prefix, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcd count %q: %w", prefix, translateError(err))
	}
	return resp.Count, nil
}

// grantLease asks etcd for a lease of ttl seconds.
func (s *Store) grantLease(ctx context.Context, ttl int64) (clientv3.LeaseID, int64, error) {
	resp, err := s.client.Grant(ctx, ttl)
	if err != nil {
		return clientv3.NoLease, 0, err
	}
	return resp.ID, resp.TTL, nil
}

// LeaseStats returns how many leases the Store granted for writes with a TTL and how
// many such writes reused an earlier lease.
func (s *Store) LeaseStats() LeaseStats { return s.leases.Stats() }

// txnWithTTL runs the transaction that build makes for the lease of a write with the
// TTL opts ask for (0: no lease): with a lease from the lease manager, and once more
// with a new lease if etcd no longer knows the cached one (revoked, or expired across
// a restart).
func (s *Store) txnWithTTL(ctx context.Context, opts []storage.WriteOption, build func(lease clientv3.LeaseID) txnRequest) (*clientv3.TxnResponse, error) {
	ttl := storage.TTL(opts)
	if ttl <= 0 {
		return s.commit(ctx, build(clientv3.NoLease))
	}
	for attempt := 0; ; attempt++ {
		id, err := s.leases.lease(ctx, ttl)
		if err != nil {
			return nil, err
		}
		resp, err := s.commit(ctx, build(id))
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			s.leases.forget(id)
			continue
		}
		return resp, err
	}
}

// txnRequest is a transaction of one put that depends on compares, with an optional
// read of the key when they fail.
type txnRequest struct {
	key     string
	value   []byte
	lease   clientv3.LeaseID
	cmps    []*pb.Compare
	elseGet bool
}

// commit runs req: straight into the embedded server's KV service when the Store has
// it, through the client otherwise. Errors are the client's either way.
func (s *Store) commit(ctx context.Context, req txnRequest) (*clientv3.TxnResponse, error) {
	if s.kv == nil {
		var put []clientv3.OpOption
		if req.lease != clientv3.NoLease {
			put = append(put, clientv3.WithLease(req.lease))
		}
		cmps := make([]clientv3.Cmp, len(req.cmps))
		for i, c := range req.cmps {
			result := "="
			if c.Result == pb.Compare_GREATER {
				result = ">"
			}
			if c.Target == pb.Compare_CREATE {
				cmps[i] = clientv3.Compare(clientv3.CreateRevision(req.key), result, c.GetCreateRevision())
			} else {
				cmps[i] = clientv3.Compare(clientv3.ModRevision(req.key), result, c.GetModRevision())
			}
		}
		txn := s.client.Txn(ctx).If(cmps...).Then(clientv3.OpPut(req.key, bytesAsString(req.value), put...))
		if req.elseGet {
			txn = txn.Else(clientv3.OpGet(req.key))
		}
		return txn.Commit()
	}
	// The value is only read during the call: the server marshals the request into
	// its raft entry before it waits for the apply.
	r := &pb.TxnRequest{
		Compare: req.cmps,
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{
			Key: []byte(req.key), Value: req.value, Lease: int64(req.lease)}}}},
	}
	if req.elseGet {
		r.Failure = []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{
			Key: r.Success[0].GetRequestPut().Key}}}}
	}
	resp, err := s.kv.Txn(ctx, r)
	if err != nil {
		return nil, clientv3.ContextError(ctx, err)
	}
	return (*clientv3.TxnResponse)(resp), nil
}

// compareRevision is a compare of key's create or mod revision with rev; result is
// EQUAL or GREATER (the ones commit knows to hand to the client as well).
func compareRevision(key string, target pb.Compare_CompareTarget, result pb.Compare_CompareResult, rev int64) *pb.Compare {
	c := &pb.Compare{Key: []byte(key), Target: target, Result: result}
	if target == pb.Compare_CREATE {
		c.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: rev}
	} else {
		c.TargetUnion = &pb.Compare_ModRevision{ModRevision: rev}
	}
	return c
}

// Create writes key if it does not exist yet and returns the new revision.
func (s *Store) Create(ctx context.Context, key string, value []byte, opts ...storage.WriteOption) (int64, error) {
	if err := s.usable(); err != nil {
		return 0, fmt.Errorf("etcd create %q: %w", key, err)
	}
	resp, err := s.txnWithTTL(ctx, opts, func(lease clientv3.LeaseID) txnRequest {
		return txnRequest{key: key, value: value, lease: lease,
			cmps: []*pb.Compare{compareRevision(key, pb.Compare_CREATE, pb.Compare_EQUAL, 0)}}
	})
	if err != nil {
		return 0, fmt.Errorf("etcd create %q: %w", key, translateError(err))
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("etcd create %q: %w", key, storage.ErrExists)
	}
	return resp.Header.Revision, nil
}

// Update overwrites key if its mod revision is expectedRevision and returns
// the new revision. Without a TTL option the key is detached from any lease it had.
func (s *Store) Update(ctx context.Context, key string, value []byte, expectedRevision int64, opts ...storage.WriteOption) (int64, error) {
	if err := s.usable(); err != nil {
		return 0, fmt.Errorf("etcd update %q: %w", key, err)
	}
	// Each compare is a range read of the key in etcd (its value decoded as well): a mod
	// revision above 0 can only match a key that exists, so the second compare, which
	// keeps an update from creating an absent key, is needed only for expectedRevision 0.
	cmps := []*pb.Compare{compareRevision(key, pb.Compare_MOD, pb.Compare_EQUAL, expectedRevision)}
	if expectedRevision <= 0 {
		cmps = append(cmps, compareRevision(key, pb.Compare_CREATE, pb.Compare_GREATER, 0))
	}
	resp, err := s.txnWithTTL(ctx, opts, func(lease clientv3.LeaseID) txnRequest {
		return txnRequest{key: key, value: value, lease: lease, cmps: cmps, elseGet: true}
	})
	if err != nil {
		return 0, fmt.Errorf("etcd update %q: %w", key, translateError(err))
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("etcd update %q: %w", key, failedCompare(resp))
	}
	return resp.Header.Revision, nil
}

// Delete removes key, only if its mod revision is expectedRevision when that
// is non-zero, and returns the deleted value and the revision of the delete.
func (s *Store) Delete(ctx context.Context, key string, expectedRevision int64) (storage.KeyValue, int64, error) {
	if err := s.usable(); err != nil {
		return storage.KeyValue{}, 0, fmt.Errorf("etcd delete %q: %w", key, err)
	}
	if expectedRevision == 0 {
		resp, err := s.client.Delete(ctx, key, clientv3.WithPrevKV())
		if err != nil {
			return storage.KeyValue{}, 0, fmt.Errorf("etcd delete %q: %w", key, translateError(err))
		}
		if resp.Deleted == 0 || len(resp.PrevKvs) == 0 {
			return storage.KeyValue{}, 0, fmt.Errorf("etcd delete %q: %w", key, storage.ErrNotFound)
		}
		return toKeyValue(resp.PrevKvs[0]), resp.Header.Revision, nil
	}
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", expectedRevision)).
		Then(clientv3.OpDelete(key, clientv3.WithPrevKV())).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return storage.KeyValue{}, 0, fmt.Errorf("etcd delete %q: %w", key, translateError(err))
	}
	if !resp.Succeeded {
		return storage.KeyValue{}, 0, fmt.Errorf("etcd delete %q: %w", key, failedCompare(resp))
	}
	del := resp.Responses[0].GetResponseDeleteRange()
	if del == nil || len(del.PrevKvs) == 0 {
		// Cannot happen: a positive mod revision matched, so the key existed.
		return storage.KeyValue{}, 0, fmt.Errorf("etcd delete %q: %w", key, storage.ErrNotFound)
	}
	return toKeyValue(del.PrevKvs[0]), resp.Header.Revision, nil
}

// CurrentRevision returns the store's latest revision.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	if err := s.usable(); err != nil {
		return 0, fmt.Errorf("etcd current revision: %w", err)
	}
	// A count-only read of one key is the cheapest linearizable request.
	resp, err := s.client.Get(ctx, "/", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcd current revision: %w", translateError(err))
	}
	return resp.Header.Revision, nil
}

// Compact discards every revision older than rev and waits until etcd has
// applied the compaction. Reads and watches at older revisions then fail with
// storage.ErrCompacted.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	if err := s.usable(); err != nil {
		return fmt.Errorf("etcd compact at %d: %w", rev, err)
	}
	if _, err := s.client.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return fmt.Errorf("etcd compact at %d: %w", rev, translateError(err))
	}
	return nil
}

// usable returns ErrClosed once the Store is closed: a closed client would
// otherwise make every call wait out the client's retry back-off.
func (s *Store) usable() error {
	if s.closed.Err() != nil {
		return ErrClosed
	}
	return nil
}

// failedCompare turns the Else branch of an update or delete (a Get of the
// key) into ErrNotFound or a *storage.ConflictError carrying the current value.
func failedCompare(resp *clientv3.TxnResponse) error {
	var kvs []*mvccpb.KeyValue
	if len(resp.Responses) > 0 {
		if rr := resp.Responses[0].GetResponseRange(); rr != nil {
			kvs = rr.Kvs
		}
	}
	if len(kvs) == 0 {
		return storage.ErrNotFound
	}
	return &storage.ConflictError{Current: toKeyValue(kvs[0])}
}

// translateError adds the storage sentinel matching an etcd error, keeping the
// original reachable too.
func translateError(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("%w: %w", storage.ErrCompacted, err)
	case errors.Is(err, rpctypes.ErrFutureRev):
		return fmt.Errorf("%w: %w", storage.ErrFutureRevision, err)
	}
	return err
}

// bytesAsString views value as a string without copying it, for clientv3.OpPut, which
// takes the value as a string only to copy it into its request at once: the caller's
// slice is read during the call and never kept.
func bytesAsString(value []byte) string {
	return unsafe.String(unsafe.SliceData(value), len(value))
}

func toKeyValue(kv *mvccpb.KeyValue) storage.KeyValue {
	return storage.KeyValue{
		Key:            string(kv.Key),
		Value:          kv.Value,
		ModRevision:    kv.ModRevision,
		CreateRevision: kv.CreateRevision,
	}
}
