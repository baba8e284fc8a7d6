package flowcontrol

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
)

// Upstream's work estimator defaults (k8s.io/apiserver's request package, with the
// object-count list estimate).
const (
	minimumSeats = 1
	// maximumSeats bounds the seats of a list and the final seats of a write.
	maximumSeats = 10
	// objectsPerSeat is how many objects a list processes per seat.
	objectsPerSeat = 100
	// watchesPerSeat is how many watchers of a write's event make a seat of fan-out.
	watchesPerSeat = 10
	// eventAdditionalDuration is how long a seat of fan-out is held after the write.
	eventAdditionalDuration = 5 * time.Millisecond
	// levelMaxSeatsFraction of a queuing level's seats is the most one request takes.
	levelMaxSeatsFraction = 0.15
)

// ObjectCounter tells how many objects of a resource the server stores, in all
// namespaces (ok false: it does not know); the API server answers from its watch
// caches. A list's seats come from it, as upstream's from its object count tracker.
type ObjectCounter interface {
	ObjectCount(gr schema.GroupResource) (n int64, ok bool)
}

// estimate is the work of a request: seats while it executes, then finalSeats for
// additional after it finished (the watch fan-out of a write), as upstream's
// WorkEstimate; the request holds the larger of the two from dispatch to the end.
type estimate struct {
	seats, finalSeats int
	additional        time.Duration
}

func (e estimate) maxSeats() int { return max(e.seats, e.finalSeats) }

// work is what the fair queuing charges the request's queue, in seat-seconds: its
// seats for the estimated service time, and its final seats for the additional time.
func (e estimate) work() float64 {
	return float64(e.seats)*estimatedServiceTime.Seconds() + float64(e.finalSeats)*e.additional.Seconds()
}

var oneSeat = estimate{seats: minimumSeats}

// levelMaxSeats is the most seats upstream lets one request of a queuing level take:
// 15% of its seats, at most its seats over its hand size, at least 1 (0 for other
// levels: the estimators' own bound applies).
func levelMaxSeats(sh shape, seats int) int {
	if sh.exempt || sh.reject || sh.handSize <= 0 {
		return 0
	}
	return max(1, min(int(ceilDiv(int64(seats)*15, 100)), seats/sh.handSize))
}

// estimateWork is upstream's width of a request: a list by the objects it will go
// through, a write by the watchers its event fans out to, one seat for the rest.
// levelMax is levelMaxSeats of the request's level.
func (c *Controller) estimateWork(req *http.Request, a *authorizer.Attributes, levelMax int) estimate {
	switch a.Verb {
	case "list":
		return estimate{seats: c.listSeats(req, a, levelMax, false)}
	case "watch":
		// A watch costs more than a seat only when it asks for its initial events,
		// which the watch cache sends.
		if strings.Contains(req.URL.RawQuery, "sendInitialEvents") && req.URL.Query().Get("sendInitialEvents") == "true" {
			return estimate{seats: c.listSeats(req, a, levelMax, true)}
		}
	case "create", "update", "patch", "delete":
		return c.writeWork(a, levelMax)
	}
	return oneSeat
}

// listSeats is upstream's list estimate by object count: ceil(objects / 100) seats,
// at least 1 and at most the level's bound and 10, where objects is the resource's
// stored count (in all namespaces) for a list served from the watch cache, the count
// plus the page for one read from storage with a selector, and twice the page (the
// limit, or the count when smaller or unset) for one read from storage without; a
// list of one name is one object, and a resource whose count is unknown (no watch
// cache) one seat.
func (c *Controller) listSeats(req *http.Request, a *authorizer.Attributes, levelMax int, fromCache bool) int {
	maxSeats := maximumSeats
	if levelMax > 0 && levelMax < maxSeats {
		maxSeats = levelMax
	}
	if a.Name != "" || c.cfg.Objects == nil {
		return minimumSeats
	}
	stored, ok := c.cfg.Objects.ObjectCount(schema.GroupResource{Group: a.APIGroup, Resource: a.Resource})
	if !ok {
		return minimumSeats
	}
	var q url.Values
	if req.URL.RawQuery != "" {
		q = req.URL.Query()
	}
	// Where this server serves the list from: the watch cache for resourceVersion=0
	// without a continue token, storage otherwise.
	fromCache = fromCache || (q.Get("resourceVersion") == "0" && q.Get("continue") == "")
	page := stored
	if limit, err := strconv.ParseInt(q.Get("limit"), 10, 64); err == nil && limit > 0 && limit < stored {
		page = limit
	}
	var objects int64
	switch {
	case fromCache:
		objects = stored
	case a.FieldSelector != "" || q.Get("labelSelector") != "":
		objects = stored + page
	default:
		objects = 2 * page
	}
	return int(min(max(ceilDiv(objects, objectsPerSeat), minimumSeats), int64(maxSeats)))
}

// writeWork is upstream's estimate of a write: one seat, and when ten or more watches
// may receive its event, ceil(watches / 10) seats of fan-out for 5 ms after it
// finished, narrowed to the bound (and held longer, the same seat-time).
func (c *Controller) writeWork(a *authorizer.Attributes, levelMax int) estimate {
	if a.Resource == "serviceaccounts" && a.Subresource == "token" {
		return oneSeat // makes no event
	}
	watches := c.watches.interested(a)
	if watches < watchesPerSeat {
		return oneSeat
	}
	final := int(ceilDiv(int64(watches), watchesPerSeat))
	work := time.Duration(final) * eventAdditionalDuration
	maxSeats := maximumSeats
	if levelMax > 0 && levelMax < maxSeats {
		maxSeats = levelMax
	}
	final = min(final, maxSeats)
	return estimate{seats: minimumSeats, finalSeats: final, additional: work / time.Duration(final)}
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
