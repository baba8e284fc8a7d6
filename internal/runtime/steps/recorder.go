package steps

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// QueueLength is how many steps wait for their Event at most; a step that finds the queue
// full is dropped (and counted).
const QueueLength = 256

// sendTimeout bounds one Event's create request; attempts is how often it is tried.
const (
	sendTimeout = 10 * time.Second
	attempts    = 3
)

// Recorder sends the runtime's steps as Events. Record never blocks; Run sends.
type Recorder struct {
	client  kubernetes.Interface
	node    string
	log     *slog.Logger
	queue   chan Step
	sent    atomic.Int64
	dropped atomic.Int64
	failed  atomic.Int64
}

// New returns a Recorder that creates Events with client, reported by node (the Events'
// reportingInstance). log may be nil.
func New(client kubernetes.Interface, node string, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Recorder{client: client, node: node, log: log, queue: make(chan Step, QueueLength)}
}

// Record queues a step's Event without waiting; when the queue is full, the step is dropped.
func (r *Recorder) Record(s Step) {
	if s.Pod.Name == "" || s.Pod.Namespace == "" {
		return // not a pod's sandbox (crictl's): nothing to report on
	}
	select {
	case r.queue <- s:
	default:
		if n := r.dropped.Add(1); n&(n-1) == 0 { // the 1st, 2nd, 4th, 8th... drop
			r.log.Warn("runtime Event queue full: dropping steps", "dropped", n)
		}
	}
}

// Stats are the Recorder's counts so far: Events sent, steps dropped because the queue was
// full, Events the API server did not take.
type Stats struct{ Sent, Dropped, Failed int64 }

// Stats returns the counts so far.
func (r *Recorder) Stats() Stats {
	return Stats{Sent: r.sent.Load(), Dropped: r.dropped.Load(), Failed: r.failed.Load()}
}

// Run sends the queued steps' Events, one at a time, until ctx ends; steps still queued
// then are dropped.
func (r *Recorder) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-r.queue:
			r.send(ctx, s)
		}
	}
}

// send creates the step's Event, trying again after a failure that may pass.
func (r *Recorder) send(ctx context.Context, s Step) {
	ev := r.Event(s)
	var err error
	for i := range attempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(i) * time.Second):
			}
		}
		cctx, cancel := context.WithTimeout(ctx, sendTimeout)
		_, err = r.client.EventsV1().Events(ev.Namespace).Create(cctx, ev, metav1.CreateOptions{})
		cancel()
		if err == nil || apierrors.IsAlreadyExists(err) {
			r.sent.Add(1)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsNotFound(err) || apierrors.IsBadRequest(err) {
			break // a terminating namespace, a rejected Event: trying again will not help
		}
	}
	r.failed.Add(1)
	r.log.Debug("runtime Event not recorded", "pod", s.Pod.Namespace+"/"+s.Pod.Name, "reason", s.Reason(), "err", err)
}

// Event is the events.k8s.io/v1 Event of a step: regarding the pod, at the step's end
// (eventTime, microseconds), reported by Controller on the Recorder's node, with the CRI
// call as action.
func (r *Recorder) Event(s Step) *eventsv1.Event {
	t := s.End
	if t.IsZero() {
		t = time.Now()
	}
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			// As client-go's recorders name theirs: the object's name and the time in hex.
			Name:      s.Pod.Name + "." + strconv.FormatInt(t.UnixNano(), 16),
			Namespace: s.Pod.Namespace,
		},
		EventTime:           metav1.NewMicroTime(t),
		ReportingController: Controller,
		ReportingInstance:   r.node,
		Action:              s.Action(),
		Reason:              s.Reason(),
		Regarding: corev1.ObjectReference{
			APIVersion: "v1", Kind: "Pod", Namespace: s.Pod.Namespace, Name: s.Pod.Name, UID: types.UID(s.Pod.UID),
		},
		Note: truncate(s.Message(), noteLimit),
		Type: corev1.EventTypeNormal,
	}
}

// noteLimit is the longest note the API accepts (upstream's 1 kB).
const noteLimit = 1024

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-len("…")], "") + "…"
}

// String describes the counts.
func (s Stats) String() string {
	return fmt.Sprintf("sent %d, dropped %d, failed %d", s.Sent, s.Dropped, s.Failed)
}
