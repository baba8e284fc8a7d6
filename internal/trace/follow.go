package trace

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Endpoint is the API server path that serves records (see Recorder.ServeHTTP).
const Endpoint = "/debug/trace"

// kinds maps the names `kubette trace` accepts to the canonical kind.
var kinds = map[string]string{
	"deployment": "Deployment", "deployments": "Deployment", "deploy": "Deployment",
	"replicaset": "ReplicaSet", "replicasets": "ReplicaSet", "rs": "ReplicaSet",
	"pod": "Pod", "pods": "Pod", "po": "Pod",
	"service": "Service", "services": "Service", "svc": "Service",
	"ingress": "Ingress", "ingresses": "Ingress", "ing": "Ingress",
}

// resources maps kinds to the resource names records use.
var resources = map[string]string{
	"Deployment": "deployments.apps", "ReplicaSet": "replicasets.apps", "Pod": "pods",
	"Service": "services", "EndpointSlice": "endpointslices.discovery.k8s.io", "Endpoints": "endpoints",
	"Ingress": "ingresses.networking.k8s.io",
}

// ParseKind reads the kind of KIND/NAME (deployment, deploy, rs, pod, svc, ing, ...).
func ParseKind(s string) (string, error) {
	if k, ok := kinds[strings.ToLower(s)]; ok {
		return k, nil
	}
	return "", fmt.Errorf("kind %q: trace follows deployments, replicasets, pods, services and ingresses", s)
}

// Follow finds the object and what it caused, root first, then each level in name order:
// a Deployment's ReplicaSets and their Pods (controller owner references); a Service's
// EndpointSlices (labelled with its name, owned by it) and its Endpoints (same name); an
// Ingress's backend Services and theirs. Objects found by name rather than by owner
// reference get their parent as Owner, so that flows group them under it.
func Follow(ctx context.Context, client kubernetes.Interface, kind, namespace, name string) ([]Object, error) {
	var root Object
	switch kind {
	case "Deployment":
		d, err := client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get deployment %s/%s: %w", namespace, name, err)
		}
		root = object(kind, d.ObjectMeta)
	case "ReplicaSet":
		rs, err := client.AppsV1().ReplicaSets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get replicaset %s/%s: %w", namespace, name, err)
		}
		root = object(kind, rs.ObjectMeta)
	case "Pod":
		p, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
		}
		root = object(kind, p.ObjectMeta)
	case "Service":
		svc, err := client.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get service %s/%s: %w", namespace, name, err)
		}
		root = object(kind, svc.ObjectMeta)
		root.Owner = ""
		return followService(ctx, client, root, []Object{root})
	case "Ingress":
		return followIngress(ctx, client, namespace, name)
	default:
		return nil, fmt.Errorf("kind %q: trace follows Deployments, ReplicaSets, Pods, Services and Ingresses", kind)
	}
	root.Owner = ""
	out := []Object{root}
	parents := map[types.UID]bool{types.UID(root.UID): true}
	if kind == "Deployment" {
		list, err := client.AppsV1().ReplicaSets(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list replicasets in %s: %w", namespace, err)
		}
		level := []Object{}
		for _, rs := range list.Items {
			if c := metav1.GetControllerOf(&rs); c != nil && parents[c.UID] {
				level = append(level, object("ReplicaSet", rs.ObjectMeta))
			}
		}
		out = append(out, sortByName(level)...)
		parents = map[types.UID]bool{}
		for _, o := range level {
			parents[types.UID(o.UID)] = true
		}
	}
	if kind == "Deployment" || kind == "ReplicaSet" {
		list, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list pods in %s: %w", namespace, err)
		}
		level := []Object{}
		for _, p := range list.Items {
			if c := metav1.GetControllerOf(&p); c != nil && parents[c.UID] {
				level = append(level, object("Pod", p.ObjectMeta))
			}
		}
		out = append(out, sortByName(level)...)
	}
	return out, nil
}

// followService appends to out the EndpointSlices of the Service svc (its
// kubernetes.io/service-name label: the EndpointSlice controller's, owned by the
// Service, and any other manager's) and its Endpoints.
func followService(ctx context.Context, client kubernetes.Interface, svc Object, out []Object) ([]Object, error) {
	ns, name := svc.Ref.Namespace, svc.Ref.Name
	slices, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{discoveryv1.LabelServiceName: name}.String()})
	if err != nil {
		return nil, fmt.Errorf("list endpointslices of %s/%s: %w", ns, name, err)
	}
	level := []Object{}
	for _, s := range slices.Items {
		o := object("EndpointSlice", s.ObjectMeta)
		o.Owner = svc.UID
		level = append(level, o)
	}
	out = append(out, sortByName(level)...)
	ep, err := client.CoreV1().Endpoints(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		o := object("Endpoints", ep.ObjectMeta)
		o.Owner = svc.UID
		out = append(out, o)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get endpoints %s/%s: %w", ns, name, err)
	}
	return out, nil
}

// followIngress returns the Ingress, its backend Services (default backend and every
// path's, in name order; missing ones left out) and what each Service causes.
func followIngress(ctx context.Context, client kubernetes.Interface, namespace, name string) ([]Object, error) {
	ing, err := client.NetworkingV1().Ingresses(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get ingress %s/%s: %w", namespace, name, err)
	}
	root := object("Ingress", ing.ObjectMeta)
	root.Owner = ""
	out := []Object{root}
	names := map[string]bool{}
	if b := ing.Spec.DefaultBackend; b != nil && b.Service != nil {
		names[b.Service.Name] = true
	}
	for _, r := range ing.Spec.Rules {
		if r.HTTP == nil {
			continue
		}
		for _, p := range r.HTTP.Paths {
			if p.Backend.Service != nil {
				names[p.Backend.Service.Name] = true
			}
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var services []Object
	for _, n := range sorted {
		svc, err := client.CoreV1().Services(namespace).Get(ctx, n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get service %s/%s of ingress %s: %w", namespace, n, name, err)
		}
		o := object("Service", svc.ObjectMeta)
		o.Owner = root.UID
		services = append(services, o)
	}
	out = append(out, services...)
	for _, svc := range services {
		if out, err = followService(ctx, client, svc, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func object(kind string, m metav1.ObjectMeta) Object {
	o := Object{Ref: ObjectRef{Resource: resources[kind], Namespace: m.Namespace, Name: m.Name}, Kind: kind, UID: string(m.UID)}
	if c := metav1.GetControllerOfNoCopy(&m); c != nil {
		o.Owner = string(c.UID)
	}
	return o
}

func sortByName(objs []Object) []Object {
	sort.Slice(objs, func(i, j int) bool { return objs[i].Ref.Name < objs[j].Ref.Name })
	return objs
}

// Events lists the Events about the objects (by UID, or by kind and name for Events
// that carry no UID), oldest first.
func Events(ctx context.Context, client kubernetes.Interface, namespace string, objs []Object) ([]Event, error) {
	byUID := map[string]ObjectRef{}
	byName := map[string]ObjectRef{}
	for _, o := range objs {
		byUID[o.UID] = o.Ref
		byName[o.Kind+"/"+o.Ref.Name] = o.Ref
	}
	list, err := client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list events in %s: %w", namespace, err)
	}
	var out []Event
	for _, e := range list.Items {
		ref, ok := byUID[string(e.InvolvedObject.UID)]
		if !ok && e.InvolvedObject.UID == "" {
			ref, ok = byName[e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name]
		}
		if !ok {
			continue
		}
		out = append(out, fromEvent(&e, ref))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, nil
}

func fromEvent(e *corev1.Event, ref ObjectRef) Event {
	t := e.EventTime.Time
	if t.IsZero() {
		t = e.FirstTimestamp.Time
	}
	if t.IsZero() {
		t = e.CreationTimestamp.Time
	}
	component, host := e.ReportingController, e.Source.Host
	if component == "" {
		component = e.Source.Component
	}
	if host == "" {
		host = e.ReportingInstance
	}
	count := e.Count
	if e.Series != nil {
		count = e.Series.Count
	}
	return Event{Time: t, Component: EventActor(component, host), Reason: e.Reason, Message: e.Message, Object: ref, Name: e.Name, Count: count,
		Action: e.Action, AtEventTime: component == RuntimeController && !e.EventTime.IsZero()}
}

// Fetch asks the API server for the records about the objects and the Events (whose
// create requests time the Events exactly).
func Fetch(ctx context.Context, client kubernetes.Interface, objs []Object, events []Event) ([]Record, error) {
	var q Query
	for _, o := range objs {
		q.Objects = append(q.Objects, o.Ref)
	}
	for _, e := range events {
		// Created through the core API or events.k8s.io: both store the same Event.
		q.Objects = append(q.Objects, ObjectRef{Resource: "events", Namespace: e.Object.Namespace, Name: e.Name},
			ObjectRef{Resource: "events.events.k8s.io", Namespace: e.Object.Namespace, Name: e.Name})
	}
	req := client.CoreV1().RESTClient().Get().AbsPath(Endpoint)
	byNamespace := len(q.Objects) > maxObjectParams && len(objs) > 0
	if byNamespace {
		// Too many for one URL: ask for the namespace and keep the objects' records here.
		req = req.Param("namespace", objs[0].Ref.Namespace)
	} else {
		for _, o := range q.Objects {
			req = req.Param("object", o.String())
		}
	}
	raw, err := req.Timeout(30 * time.Second).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", Endpoint, err)
	}
	var resp Response
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, fmt.Errorf("decode %s: %w", Endpoint, err)
	}
	if !byNamespace {
		return resp.Records, nil
	}
	var out []Record
	for i := range resp.Records {
		if q.match(&resp.Records[i]) {
			out = append(out, resp.Records[i])
		}
	}
	return out, nil
}

// maxObjectParams is how many objects Fetch names in one URL.
const maxObjectParams = 200

// Collect gathers a flow's Input from a cluster: the object named kind/name in
// namespace, what it owns, the Events about them and the API server's records.
func Collect(ctx context.Context, client kubernetes.Interface, kind, namespace, name string) (Input, error) {
	objs, err := Follow(ctx, client, kind, namespace, name)
	if err != nil {
		return Input{}, err
	}
	events, err := Events(ctx, client, namespace, objs)
	if err != nil {
		return Input{}, err
	}
	records, err := Fetch(ctx, client, objs, events)
	if err != nil {
		return Input{}, err
	}
	ips, err := PodIPs(ctx, client, objs, records)
	if err != nil {
		return Input{}, err
	}
	return Input{Objects: objs, Records: records, Events: events, PodIPs: ips}, nil
}

// maxPodIPLookups bounds the reads PodIPs makes for one flow.
const maxPodIPLookups = 200

// PodIPs finds, for each followed pod that has an IP, the status write that set it: it
// reads the pod as of each of its status writes' revisions, oldest first (kubette's API
// server serves a list at resourceVersion N from storage at exactly revision N), until
// one has an IP. Writes whose revision storage no longer holds (compacted) end the
// search for that pod without an error.
func PodIPs(ctx context.Context, client kubernetes.Interface, objs []Object, records []Record) ([]PodIP, error) {
	writes := map[ObjectRef][]*Record{}
	for i := range records {
		r := &records[i]
		if r.Type == TypeRequest && r.Resource == "pods" && r.Subresource == "status" && writeVerbs[r.Verb] && r.Revision > 0 && r.Code/100 == 2 {
			writes[r.Ref()] = append(writes[r.Ref()], r)
		}
	}
	var out []PodIP
	lookups := 0
	for _, o := range objs {
		if o.Kind != "Pod" {
			continue
		}
		ws := writes[o.Ref]
		sort.Slice(ws, func(i, j int) bool { return ws[i].Revision < ws[j].Revision })
		for _, w := range ws {
			if lookups++; lookups > maxPodIPLookups {
				return out, nil
			}
			list, err := client.CoreV1().Pods(o.Ref.Namespace).List(ctx, metav1.ListOptions{
				FieldSelector: "metadata.name=" + o.Ref.Name, ResourceVersion: strconv.FormatInt(w.Revision, 10)})
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("read pod %s at revision %d: %w", o.Ref, w.Revision, err)
			}
			if len(list.Items) == 1 && list.Items[0].Status.PodIP != "" && string(list.Items[0].UID) == o.UID {
				out = append(out, PodIP{Seq: w.Seq, Pod: o.Ref, IP: list.Items[0].Status.PodIP})
				break
			}
		}
	}
	return out, nil
}
