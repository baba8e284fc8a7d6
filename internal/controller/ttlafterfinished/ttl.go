// Package ttlafterfinished is the TTL-after-finished controller: it deletes a Job
// spec.ttlSecondsAfterFinished seconds after the Job finished (its Complete or
// Failed condition), with foreground propagation so that its pods go first, as
// upstream's pkg/controller/ttlafterfinished.
package ttlafterfinished

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/job"
	"github.com/kubette/kubette/internal/controller/worker"
)

// Name is the controller's name in the controller manager's registry.
const Name = "ttl-after-finished"

// ClientName is the name of the controller's client and ServiceAccount upstream.
const ClientName = "ttl-after-finished-controller"

// Controller deletes finished Jobs whose TTL expired.
type Controller struct {
	client    kubernetes.Interface
	clock     clock.Clock
	log       *slog.Logger
	jobLister batchlisters.JobLister
	jobSynced cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
}

var _ controller.Runner = (*Controller)(nil)

// New builds the controller on the shared informers of d.
func New(d controller.Deps) (controller.Runner, error) { return NewWithClock(d, clock.RealClock{}) }

// NewWithClock builds the controller with its clock (tests give a fake one).
func NewWithClock(d controller.Deps, clk clock.WithTicker) (*Controller, error) {
	if d.Client == nil || d.Informers == nil {
		return nil, fmt.Errorf("ttl-after-finished controller needs a client and informers")
	}
	inf := d.Informers.Batch().V1().Jobs()
	c := &Controller{
		client: d.Client, clock: clk, log: slog.Default().With("controller", Name),
		jobLister: inf.Lister(), jobSynced: inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name, Clock: clk}),
	}
	enqueue := func(obj any) {
		j, ok := obj.(*batchv1.Job)
		if !ok || !needsCleanup(j) {
			return
		}
		if key, err := cache.MetaNamespaceKeyFunc(j); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, cur any) { enqueue(cur) },
	}); err != nil {
		return nil, fmt.Errorf("failed to add Job event handler: %w", err)
	}
	return c, nil
}

// Run runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, worker.Options{
		Name: Name, Workers: workers, Synced: []cache.InformerSynced{c.jobSynced}, Sync: c.Sync, Log: c.log,
	})
}

func needsCleanup(j *batchv1.Job) bool {
	done, _ := job.IsFinished(j)
	return j.Spec.TTLSecondsAfterFinished != nil && j.DeletionTimestamp == nil && done
}

// expiresIn is how long until the Job's TTL expires (negative once it has).
func (c *Controller) expiresIn(j *batchv1.Job) time.Duration {
	_, at := job.IsFinished(j)
	return at.Add(time.Duration(*j.Spec.TTLSecondsAfterFinished) * time.Second).Sub(c.clock.Now())
}

// Sync deletes the Job of key once its TTL expired, or looks again when it will.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("invalid key %q: %w", key, err)
	}
	j, err := c.jobLister.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get Job %s: %w", key, err)
	}
	if !needsCleanup(j) {
		return nil
	}
	if d := c.expiresIn(j); d > 0 {
		c.queue.AddAfter(key, d)
		return nil
	}
	// The cache may be stale (the TTL changed): check the live Job before deleting.
	fresh, err := c.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get Job %s: %w", key, err)
	}
	if !needsCleanup(fresh) {
		return nil
	}
	if d := c.expiresIn(fresh); d > 0 {
		c.queue.AddAfter(key, d)
		return nil
	}
	policy := metav1.DeletePropagationForeground
	err = c.client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: &policy,
		Preconditions:     &metav1.Preconditions{UID: &fresh.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Job %s: %w", key, err)
	}
	c.log.Info("deleted finished Job after its TTL", "job", key)
	return nil
}
