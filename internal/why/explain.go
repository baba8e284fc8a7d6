package why

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// Kind is what `why` explains.
type Kind string

// The kinds `why` explains.
const (
	KindPod        Kind = "Pod"
	KindService    Kind = "Service"
	KindDeployment Kind = "Deployment"
)

// ParseKind accepts pod/po/pods, service/svc/services and deployment/deploy/deployments.
func ParseKind(s string) (Kind, error) {
	switch strings.ToLower(s) {
	case "pod", "po", "pods":
		return KindPod, nil
	case "service", "svc", "services":
		return KindService, nil
	case "deployment", "deploy", "deployments":
		return KindDeployment, nil
	}
	return "", fmt.Errorf("kind %q: want pod, service or deployment", s)
}

// Explain reads the object and what it depends on through client and explains
// it. The log lines of crashed containers are read through pods/log (tailLines=5);
// a kubelet that does not answer only means no log lines.
func Explain(ctx context.Context, client kubernetes.Interface, kind Kind, namespace, name string) (*Report, error) {
	rep := &Report{Kind: string(kind), Namespace: namespace, Name: name}
	in := podInputs{client: client, logs: apiLogs(client)}
	switch kind {
	case KindPod:
		pod, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
		}
		if err := in.load(ctx, namespace); err != nil {
			return nil, err
		}
		pr, err := explainPod(ctx, in, pod)
		if err != nil {
			return nil, err
		}
		rep.Pods, rep.Summary = []PodReport{pr}, pr.Summary
	case KindDeployment:
		d, err := client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get deployment %s/%s: %w", namespace, name, err)
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("deployment %s/%s selector: %w", namespace, name, err)
		}
		if err := in.load(ctx, namespace); err != nil {
			return nil, err
		}
		var pods []*corev1.Pod
		for _, p := range in.cluster.Pods {
			if p.Namespace == namespace && sel.Matches(labels.Set(p.Labels)) {
				pods = append(pods, p)
			}
		}
		sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
		ready := 0
		for _, p := range pods {
			pr, err := explainPod(ctx, in, p)
			if err != nil {
				return nil, err
			}
			if pr.Ready {
				ready++
			}
			rep.Pods = append(rep.Pods, pr)
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		rep.Summary = fmt.Sprintf("%d/%d pod(s) ready (%d wanted)", ready, len(pods), want)
		if len(pods) == 0 && want > 0 {
			rep.Summary += "; no pods: is the controller manager running? (see the ReplicaSet's events)"
		}
	case KindService:
		svc, err := client.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get service %s/%s: %w", namespace, name, err)
		}
		if err := in.load(ctx, namespace); err != nil {
			return nil, err
		}
		list, err := client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		if err != nil {
			return nil, fmt.Errorf("list endpointslices of %s/%s: %w", namespace, name, err)
		}
		var slices []*discoveryv1.EndpointSlice
		for i := range list.Items {
			if list.Items[i].Labels[discoveryv1.LabelServiceName] == name {
				slices = append(slices, &list.Items[i])
			}
		}
		sr, summary, err := explainService(ctx, in, svc, slices)
		if err != nil {
			return nil, err
		}
		rep.Service, rep.Summary = sr, summary
	default:
		return nil, fmt.Errorf("kind %q: want pod, service or deployment", kind)
	}
	return rep, nil
}

// load lists the nodes, every pod (the snapshot counts pods of all namespaces),
// the namespaces and the events of namespace (core/v1 and events.k8s.io/v1).
func (in *podInputs) load(ctx context.Context, namespace string) error {
	nodes, err := in.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for i := range nodes.Items {
		in.cluster.Nodes = append(in.cluster.Nodes, &nodes.Items[i])
	}
	pods, err := in.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	for i := range pods.Items {
		in.cluster.Pods = append(in.cluster.Pods, &pods.Items[i])
	}
	nss, err := in.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	for i := range nss.Items {
		in.cluster.Namespaces = append(in.cluster.Namespaces, &nss.Items[i])
	}
	core, err := in.client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list events in %s: %w", namespace, err)
	}
	for _, e := range core.Items {
		t := e.LastTimestamp.Time
		if t.IsZero() {
			t = e.EventTime.Time
		}
		if t.IsZero() {
			t = e.CreationTimestamp.Time
		}
		count := e.Count
		if e.Series != nil {
			count = e.Series.Count
		}
		in.events = append(in.events, event{UID: string(e.InvolvedObject.UID), Kind: e.InvolvedObject.Kind, Name: e.InvolvedObject.Name,
			Type: e.Type, Reason: e.Reason, Message: e.Message, Count: count, Time: t})
	}
	modern, err := in.client.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("list events.k8s.io events in %s: %w", namespace, err)
	}
	if err == nil {
		seen := map[string]bool{}
		for _, e := range core.Items {
			seen[string(e.UID)] = true
		}
		for _, e := range modern.Items {
			if seen[string(e.UID)] {
				continue // the same Event seen through both groups
			}
			t := e.EventTime.Time
			count := int32(1)
			if e.Series != nil {
				count, t = e.Series.Count, e.Series.LastObservedTime.Time
			}
			if t.IsZero() {
				t = e.DeprecatedLastTimestamp.Time
			}
			if t.IsZero() {
				t = e.CreationTimestamp.Time
			}
			in.events = append(in.events, event{UID: string(e.Regarding.UID), Kind: e.Regarding.Kind, Name: e.Regarding.Name,
				Type: e.Type, Reason: e.Reason, Message: e.Note, Count: count, Time: t})
		}
	}
	return nil
}
