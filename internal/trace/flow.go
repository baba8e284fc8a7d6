package trace

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Object is one object the flow follows, as found through owner references.
type Object struct {
	Ref  ObjectRef `json:"ref"`
	Kind string    `json:"kind"`
	UID  string    `json:"uid,omitempty"`
	// Owner is the UID of its controlling owner ("" for the root).
	Owner string `json:"owner,omitempty"`
}

// Event is a component's decision, read from a core/v1 Event about one of the objects.
type Event struct {
	// Time is when the Event was first created (its create request's time when recorded).
	Time time.Time `json:"time"`
	// Component reported it (as EventActor names it).
	Component string    `json:"component"`
	Reason    string    `json:"reason"`
	Message   string    `json:"message"`
	Object    ObjectRef `json:"object"`
	// Name is the Event's own name, to find its create request among the records.
	Name  string `json:"name,omitempty"`
	Count int32  `json:"count,omitempty"`
	// Action is what the reporter did (events.k8s.io's action): for the runtime's Events,
	// the CRI call the step answered (RunPodSandbox, CreateContainer, StartContainer, ...).
	Action string `json:"action,omitempty"`
	// AtEventTime says Time is when the step happened (the reporter's eventTime), to be
	// kept rather than replaced by the time of the Event's create request: the runtime
	// sends its Events in the background, after steps no API request shows.
	AtEventTime bool `json:"atEventTime,omitempty"`
}

// Input is everything a flow is built from: the followed objects (the first is the
// root), the API server's records about them and the Events about them. It is what
// `kubette trace` fetches and what test fixtures hold.
type Input struct {
	Objects []Object `json:"objects"`
	Records []Record `json:"records"`
	Events  []Event  `json:"events"`
	// PodIPs are the status writes that gave a pod its IP (see PodIPs).
	PodIPs []PodIP `json:"podIPs,omitempty"`
}

// PodIP is the status write (a record, by Seq) that first set a pod's IP: the kubelet's
// step that created the pod's sandbox and its network, which the API sees only as that
// write.
type PodIP struct {
	Seq uint64    `json:"seq"`
	Pod ObjectRef `json:"pod"`
	IP  string    `json:"ip"`
}

// StepKind says what a step draws.
type StepKind int

const (
	// StepRequest is a request from a component to the API server.
	StepRequest StepKind = iota
	// StepWrite is the API server's write to etcd.
	StepWrite
	// StepDelivery is a watch event the API server sent to a component.
	StepDelivery
	// StepNote is a component's decision (an Event).
	StepNote
	// StepCall is a node component's call to another that the API never sees, with what
	// the callee did: the kubelet's CRI call to the runtime (RunPodSandbox: CNI ADD ...),
	// drawn from the runtime's Events.
	StepCall
)

// Step is one line of the diagram.
type Step struct {
	Kind     StepKind
	From, To string
	Label    string
	Time     time.Time
	// Count is how many equal steps this one stands for (1 unless folded).
	Count int
	// Noun names what was folded, in the plural (pods).
	Noun string
	// RevFirst and RevLast are the range of revisions a folded write or delivery spans.
	RevFirst, RevLast int64
	// Several is true when the folded steps are about more than one object.
	Several bool

	obj     ObjectRef
	owner   string
	foldKey string
}

// Phase is one control loop's run: consecutive steps of one component.
type Phase struct {
	Owner string
	Steps []Step
}

// Flow is a built sequence diagram: participants in order of appearance and phases.
type Flow struct {
	Participants []string
	Phases       []Phase
	// Start is the time of the first step.
	Start time.Time
}

// Options tune Build.
type Options struct {
	// All keeps every record (reads, watches, Event writes, deliveries nobody acts on)
	// and folds nothing.
	All bool
}

var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// Build turns an Input into a Flow: steps in time order, grouped in phases per control
// loop and, unless opts.All, reads dropped, deliveries that no later step of their
// receiver follows dropped, and repeated work on sibling objects folded (×3 pods).
func Build(in Input, opts Options) Flow {
	family := map[ObjectRef]string{} // object → what its siblings share (kind and owner)
	nouns := map[ObjectRef]string{}
	byUID := map[string]ObjectRef{}
	for _, o := range in.Objects {
		byUID[o.UID] = o.Ref
	}
	owners := map[ObjectRef]ObjectRef{}
	for _, o := range in.Objects {
		if ref, ok := byUID[o.Owner]; ok && o.Owner != "" {
			owners[o.Ref] = ref
		}
		family[o.Ref] = o.Kind + "@" + o.Owner
		nouns[o.Ref] = plural(strings.ToLower(o.Kind))
	}
	// Notes fold when their messages differ only in sibling objects' names.
	var famPairs []string
	objs := append([]Object(nil), in.Objects...)
	sort.SliceStable(objs, func(i, j int) bool { return len(objs[i].Ref.Name) > len(objs[j].Ref.Name) })
	for _, o := range objs {
		famPairs = append(famPairs, o.Ref.Name, "{"+family[o.Ref]+"}")
	}
	famNames := strings.NewReplacer(famPairs...)
	eventCreates := map[string]time.Time{}
	podIPs := map[uint64]string{}
	for _, p := range in.PodIPs {
		podIPs[p.Seq] = p.IP
	}
	var steps []Step
	for i := range in.Records {
		r := &in.Records[i]
		if r.Resource == "events" || r.Resource == "events.events.k8s.io" {
			if r.Verb == "create" && r.Name != "" {
				eventCreates[r.Namespace+"/"+r.Name] = r.Time
			}
			if !opts.All {
				continue
			}
		}
		fam := family[r.Ref()]
		switch r.Type {
		case TypeRequest:
			if !opts.All && (!writeVerbs[r.Verb] || r.Code == 0) {
				continue
			}
			actor := Actor(r.User, r.UserAgent, r.FieldManager, r.Resource, r.Subresource, false)
			label := r.Method + " " + r.Path
			if r.Code != 0 {
				label += " → " + strconv.Itoa(r.Code)
			}
			st := Step{Kind: StepRequest, From: actor, To: APIServer, Label: label, Time: r.Time, owner: actor}
			st.foldKey, st.Noun, st.obj = foldKey(st, r, fam), nouns[r.Ref()], r.Ref()
			steps = append(steps, st)
			if r.Key != "" && r.Revision != 0 {
				w := Step{Kind: StepWrite, From: APIServer, To: Etcd, Label: r.WriteOp + " " + r.Key, Time: r.Time,
					RevFirst: r.Revision, RevLast: r.Revision, owner: actor}
				w.foldKey, w.Noun, w.obj = foldKey(w, r, fam), nouns[r.Ref()], r.Ref()
				steps = append(steps, w)
			}
			if ip, ok := podIPs[r.Seq]; ok {
				n := Step{Kind: StepNote, From: actor, To: actor, Label: "podIP " + ip + " set: sandbox and network ready", Time: r.Time, owner: actor, Noun: nouns[r.Ref()], obj: r.Ref()}
				if fam != "" {
					n.foldKey = "podip|" + actor + "|" + fam
				}
				steps = append(steps, n)
			}
		case TypeDelivery:
			actor := Actor(r.User, r.UserAgent, r.FieldManager, r.Resource, r.Subresource, true)
			obj := r.Name
			if r.Namespace != "" {
				obj = r.Namespace + "/" + r.Name
			}
			st := Step{Kind: StepDelivery, From: APIServer, To: actor, Label: "watch " + r.EventType + " " + strings.ToLower(r.Kind) + " " + obj,
				Time: r.Time, RevFirst: r.Revision, RevLast: r.Revision, owner: actor}
			st.foldKey, st.Noun, st.obj = foldKey(st, r, fam), nouns[r.Ref()], r.Ref()
			steps = append(steps, st)
		}
	}
	for _, e := range in.Events {
		t := e.Time
		if ct, ok := eventCreates[e.Object.Namespace+"/"+e.Name]; ok && !e.AtEventTime {
			t = ct
		}
		if node, ok := runtimeNode(e.Component); ok {
			steps = append(steps, runtimeCall(e, node, t, nouns[e.Object], famNames))
			continue
		}
		st := Step{Kind: StepNote, From: e.Component, To: e.Component, Label: e.Reason + ": " + e.Message, Time: t, owner: e.Component, Noun: nouns[e.Object], obj: e.Object}
		st.foldKey = fmt.Sprintf("note|%s|%s|%s", e.Component, e.Reason, famNames.Replace(e.Message))
		steps = append(steps, st)
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].Time.Before(steps[j].Time) })

	if !opts.All {
		steps = dropIdleDeliveries(steps, owners)
	}
	for i := range steps {
		steps[i].Count = 1
	}
	f := Flow{}
	if len(steps) > 0 {
		f.Start = steps[0].Time
	}
	seen := map[string]bool{}
	addParticipant := func(p string) {
		if !seen[p] {
			seen[p] = true
			f.Participants = append(f.Participants, p)
		}
	}
	lastPhase := map[string]int{} // owner → index of its latest phase
	for _, st := range steps {
		pi, ok := lastPhase[st.owner]
		if ok && !opts.All && onlyDeliveriesAfter(f.Phases, pi) {
			// The phases since this component's last one are only notifications to others,
			// sent while it was still at work: its steps stay together, repeated ones folded.
			if fold(&f.Phases[pi], st) {
				continue
			}
		} else if n := len(f.Phases); n == 0 || f.Phases[n-1].Owner != st.owner {
			f.Phases = append(f.Phases, Phase{Owner: st.owner})
			pi = len(f.Phases) - 1
			lastPhase[st.owner] = pi
		} else {
			pi = n - 1
		}
		addParticipant(st.From)
		addParticipant(st.To)
		f.Phases[pi].Steps = append(f.Phases[pi].Steps, st)
	}
	return f
}

// onlyDeliveriesAfter reports whether every phase after index i holds only watch deliveries.
func onlyDeliveriesAfter(phases []Phase, i int) bool {
	for _, p := range phases[i+1:] {
		for _, st := range p.Steps {
			if st.Kind != StepDelivery {
				return false
			}
		}
	}
	return true
}

// fold merges st into an equal step of phase p and reports whether it did.
func fold(p *Phase, st Step) bool {
	if st.foldKey == "" {
		return false
	}
	for i := range p.Steps {
		s := &p.Steps[i]
		if s.foldKey != st.foldKey {
			continue
		}
		s.Count++
		s.Several = s.Several || s.obj != st.obj
		if st.Kind == StepCall {
			s.Label = mergeLabels(s.Label, st.Label)
		}
		if st.RevFirst != 0 && (s.RevFirst == 0 || st.RevFirst < s.RevFirst) {
			s.RevFirst = st.RevFirst
		}
		if st.RevLast > s.RevLast {
			s.RevLast = st.RevLast
		}
		return true
	}
	return false
}

// foldKey is what a step has in common with the same step on a sibling object: the
// object's name replaced by its family, revisions left out. Steps on objects outside
// any family (the root) do not fold.
func foldKey(st Step, r *Record, fam string) string {
	if fam == "" || r.Name == "" {
		return ""
	}
	return fmt.Sprintf("%d|%s|%s|%s", st.Kind, st.From, st.To, replaceName(st.Label, r.Name, fam))
}

func replaceName(s, name, fam string) string {
	if name == "" || fam == "" {
		return s
	}
	return strings.ReplaceAll(s, name, "{"+fam+"}")
}

// dropIdleDeliveries removes watch deliveries that their receiver does not act on
// afterwards in the flow (no request and no Event about the object, its owner or one of
// its children), and repeated deliveries of one change to one receiver (a component's
// typed and metadata informers both watch).
func dropIdleDeliveries(steps []Step, owners map[ObjectRef]ObjectRef) []Step {
	children := map[ObjectRef][]ObjectRef{}
	for c, o := range owners {
		children[o] = append(children[o], c)
	}
	type act struct {
		actor string
		obj   ObjectRef
	}
	lastAct := map[act]int{} // the last step at which actor acted on obj
	for i, st := range steps {
		if st.Kind == StepRequest || st.Kind == StepNote || st.Kind == StepCall {
			lastAct[act{st.owner, st.obj}] = i
		}
	}
	actsAfter := func(i int, actor string, obj ObjectRef) bool {
		j, ok := lastAct[act{actor, obj}]
		return ok && j > i
	}
	type delivered struct {
		to, label string
		rev       int64
	}
	seen := map[delivered]bool{}
	out := steps[:0:0]
	for i, st := range steps {
		if st.Kind == StepDelivery {
			acted := actsAfter(i, st.To, st.obj)
			if o, ok := owners[st.obj]; ok && !acted {
				acted = actsAfter(i, st.To, o)
			}
			for _, c := range children[st.obj] {
				if acted {
					break
				}
				acted = actsAfter(i, st.To, c)
			}
			if !acted {
				continue
			}
			k := delivered{st.To, st.Label, st.RevFirst}
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		out = append(out, st)
	}
	return out
}

// plural is the English plural of a lower-case kind, good enough for the kinds a flow has.
func plural(kind string) string {
	switch {
	case kind == "":
		return "objects"
	case strings.HasSuffix(kind, "s"):
		return kind + "es"
	case strings.HasSuffix(kind, "y"):
		return kind[:len(kind)-1] + "ies"
	}
	return kind + "s"
}

// Text is a step's label as diagrams show it: with its revisions and how many steps
// it folds.
func (s Step) Text() string {
	t := s.Label
	switch {
	case s.RevFirst != 0 && s.RevFirst != s.RevLast:
		t += fmt.Sprintf(" (rev %d…%d)", s.RevFirst, s.RevLast)
	case s.RevFirst != 0:
		t += fmt.Sprintf(" (rev %d)", s.RevFirst)
	}
	switch {
	case s.Count > 1 && s.Several:
		t += fmt.Sprintf(" ×%d %s", s.Count, s.Noun)
	case s.Count > 1:
		t += fmt.Sprintf(" ×%d", s.Count)
	}
	return t
}
