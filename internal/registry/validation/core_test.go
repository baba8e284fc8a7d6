package validation

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateNamespace(t *testing.T) {
	ns := func(name string) *corev1.Namespace {
		return defaulted(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	withNamespace := ns("team-a")
	withNamespace.Namespace = "default"
	badFinalizer := ns("team-b")
	badFinalizer.Spec.Finalizers = append(badFinalizer.Spec.Finalizers, "custom")
	runCreateCases(t, []createCase{
		{name: "valid", obj: ns("team-a")},
		{name: "name must be a DNS label", obj: ns("team.a"), errors: []want{inv("metadata.name")}},
		// The defaulted kubernetes.io/metadata.name label is then too long as well, as upstream.
		{name: "name too long", obj: ns(strings.Repeat("a", 64)), errors: []want{inv("metadata.name"), inv("metadata.labels")}},
		{name: "cluster-scoped", obj: withNamespace, errors: []want{forb("metadata.namespace")}},
		{name: "spec finalizer not qualified", obj: badFinalizer, errors: []want{inv("spec.finalizers")}},
	})

	old := stored(ns("team-a"))
	relabeled := old.DeepCopy()
	relabeled.Labels["owner"] = "me"
	active := old.DeepCopy()
	terminatingWrong := old.DeepCopy()
	terminatingWrong.Status.Phase = corev1.NamespaceTerminating
	deleting := old.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	deletingOld := deleting.DeepCopy()
	deleting.Status.Phase = corev1.NamespaceTerminating
	deletingActive := deletingOld.DeepCopy()
	runUpdateCases(t, []updateCase{
		{name: "labels", old: old, obj: relabeled},
		{name: "status active", status: true, old: old, obj: active},
		{name: "terminating without deletion", status: true, old: old, obj: terminatingWrong, errors: []want{invd("status.Phase", "may only be 'Active' if `deletionTimestamp` is empty")}},
		{name: "terminating", status: true, old: deletingOld, obj: deleting},
		{name: "active while deleting", status: true, old: deletingOld, obj: deletingActive, errors: []want{invd("status.Phase", "may only be 'Terminating'")}},
	})
}

func validNode() *corev1.Node {
	return defaulted(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Spec: corev1.NodeSpec{
			PodCIDR:  "10.244.1.0/24",
			PodCIDRs: []string{"10.244.1.0/24"},
			Taints:   []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}},
	})
}

func TestValidateNode(t *testing.T) {
	with := func(mutate func(n *corev1.Node)) *corev1.Node {
		n := validNode()
		mutate(n)
		return n
	}
	runCreateCases(t, []createCase{
		{name: "valid", obj: validNode()},
		{name: "valid dual-stack", obj: with(func(n *corev1.Node) { n.Spec.PodCIDRs = []string{"10.244.1.0/24", "fd00:10:244:1::/64"} })},
		{name: "name invalid", obj: with(func(n *corev1.Node) { n.Name = "Node_1" }), errors: []want{inv("metadata.name")}},
		{name: "podCIDR invalid", obj: with(func(n *corev1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.1.0/33", nil }), errors: []want{inv("spec.podCIDRs[0]")}},
		{name: "two CIDRs of one family", obj: with(func(n *corev1.Node) { n.Spec.PodCIDRs = []string{"10.244.1.0/24", "10.244.2.0/24"} }),
			errors: []want{invd("spec.podCIDRs", "may specify no more than one CIDR for each IP family")}},
		{name: "taint effect invalid", obj: with(func(n *corev1.Node) { n.Spec.Taints[0].Effect = "NoRun" }), errors: []want{unsup("metadata.taints[0].effect")}},
		{name: "taint effect required", obj: with(func(n *corev1.Node) { n.Spec.Taints[0].Effect = "" }), errors: []want{req("metadata.taints[0].effect")}},
		{name: "duplicate taint", obj: with(func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, n.Spec.Taints[0]) }), errors: []want{dup("metadata.taints[1]")}},
		{name: "fractional pods capacity", obj: with(func(n *corev1.Node) { n.Status.Capacity[corev1.ResourcePods] = resource.MustParse("1.5") }),
			errors: []want{invd("status.capacity.pods", "must be an integer")}},
	})

	old := stored(validNode())
	cordoned := old.DeepCopy()
	cordoned.Spec.Unschedulable = true
	cordoned.Spec.Taints = append(cordoned.Spec.Taints, corev1.Taint{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule})
	newCIDR := old.DeepCopy()
	newCIDR.Spec.PodCIDR, newCIDR.Spec.PodCIDRs = "10.244.9.0/24", []string{"10.244.9.0/24"}
	noCIDR := stored(validNode())
	noCIDR.Spec.PodCIDR, noCIDR.Spec.PodCIDRs = "", nil
	assigned := noCIDR.DeepCopy()
	assigned.Spec.PodCIDRs = []string{"10.244.3.0/24"}
	withProvider := old.DeepCopy()
	withProvider.Spec.ProviderID = "kubette://node-1"
	changedProvider := withProvider.DeepCopy()
	changedProvider.Spec.ProviderID = "kubette://node-2"
	addrs := old.DeepCopy()
	addrs.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.10"}, {Type: corev1.NodeInternalIP, Address: "192.168.1.10"}}
	runUpdateCases(t, []updateCase{
		{name: "cordon", old: old, obj: cordoned},
		{name: "podCIDR immutable", old: old, obj: newCIDR, errors: []want{forbd("spec.podCIDRs", "node updates may not change podCIDR except from \"\" to valid")}},
		{name: "podCIDR assigned", old: noCIDR, obj: assigned},
		{name: "providerID immutable", old: withProvider, obj: changedProvider, errors: []want{forb("spec.providerID")}},
		{name: "duplicate addresses via status", status: true, old: old, obj: addrs, errors: []want{dup("status.addresses[1]")}},
	})
}

func TestValidateConfigMap(t *testing.T) {
	cm := func(data map[string]string) *corev1.ConfigMap {
		return defaulted(&corev1.ConfigMap{ObjectMeta: objectMeta("cfg"), Data: data})
	}
	big := cm(map[string]string{"a": strings.Repeat("x", 1024*1024), "b": "y"})
	both := cm(map[string]string{"k": "v"})
	both.BinaryData = map[string][]byte{"k": []byte("v")}
	runCreateCases(t, []createCase{
		{name: "valid", obj: cm(map[string]string{"app.properties": "a=b", "KEY_1": "v"})},
		{name: "invalid key", obj: cm(map[string]string{"a/b": "v"}), errors: []want{inv("data[a/b]")}},
		// Upstream reports the whole object with an empty path, printed as "[]".
		{name: "too large", obj: big, errors: []want{tooLong("[]")}},
		{name: "key in data and binaryData", obj: both, errors: []want{invd("data[k]", "duplicate of key present in binaryData")}},
		{name: "name invalid", obj: defaulted(&corev1.ConfigMap{ObjectMeta: objectMeta("Cfg")}), errors: []want{inv("metadata.name")}},
	})

	mutable := stored(cm(map[string]string{"k": "v"}))
	changed := mutable.DeepCopy()
	changed.Data["k"] = "w"
	frozen := stored(cm(map[string]string{"k": "v"}))
	frozen.Immutable = ptr(true)
	frozenChanged := frozen.DeepCopy()
	frozenChanged.Data["k"] = "w"
	thawed := frozen.DeepCopy()
	thawed.Immutable = ptr(false)
	relabeled := frozen.DeepCopy()
	relabeled.Labels = map[string]string{"a": "b"}
	runUpdateCases(t, []updateCase{
		{name: "data change", old: mutable, obj: changed},
		{name: "immutable data change", old: frozen, obj: frozenChanged, errors: []want{forbd("data", "field is immutable when `immutable` is set")}},
		{name: "immutable flag cleared", old: frozen, obj: thawed, errors: []want{forb("immutable")}},
		{name: "immutable metadata change", old: frozen, obj: relabeled},
	})
}

func TestValidateSecret(t *testing.T) {
	secret := func(typ corev1.SecretType, data map[string][]byte) *corev1.Secret {
		return defaulted(&corev1.Secret{ObjectMeta: objectMeta("s"), Type: typ, Data: data})
	}
	saToken := secret(corev1.SecretTypeServiceAccountToken, nil)
	runCreateCases(t, []createCase{
		{name: "valid opaque", obj: secret("", map[string][]byte{"password": []byte("x")})},
		{name: "valid tls", obj: secret(corev1.SecretTypeTLS, map[string][]byte{"tls.crt": nil, "tls.key": nil})},
		{name: "invalid key", obj: secret("", map[string][]byte{"bad key": nil}), errors: []want{inv("data[bad key]")}},
		{name: "too large", obj: secret("", map[string][]byte{"a": make([]byte, 1024*1024+1)}), errors: []want{tooLong("data")}},
		{name: "tls keys required", obj: secret(corev1.SecretTypeTLS, nil), errors: []want{req("data[tls.crt]"), req("data[tls.key]")}},
		{name: "dockerconfigjson must be JSON", obj: secret(corev1.SecretTypeDockerConfigJson, map[string][]byte{".dockerconfigjson": []byte("{")}), errors: []want{inv("data[.dockerconfigjson]")}},
		{name: "service account token needs annotation", obj: saToken, errors: []want{req("metadata.annotations[kubernetes.io/service-account.name]")}},
	})

	old := stored(secret("", map[string][]byte{"k": []byte("v")}))
	retyped := old.DeepCopy()
	retyped.Type = corev1.SecretTypeBasicAuth
	retyped.Data = map[string][]byte{"username": []byte("u")}
	frozen := old.DeepCopy()
	frozen.Immutable = ptr(true)
	frozenChanged := frozen.DeepCopy()
	frozenChanged.Data = map[string][]byte{"k": []byte("w")}
	noType := old.DeepCopy()
	noType.Type = ""
	runUpdateCases(t, []updateCase{
		{name: "type immutable", old: old, obj: retyped, errors: []want{immutable("type")}},
		{name: "empty type keeps stored type", old: old, obj: noType},
		{name: "immutable data", old: frozen, obj: frozenChanged, errors: []want{forbd("data", "field is immutable when `immutable` is set")}},
	})
}

func TestValidateServiceAccount(t *testing.T) {
	sa := &corev1.ServiceAccount{ObjectMeta: objectMeta("builder")}
	bad := &corev1.ServiceAccount{ObjectMeta: objectMeta("Builder")}
	runCreateCases(t, []createCase{
		{name: "valid", obj: sa},
		{name: "name invalid", obj: bad, errors: []want{inv("metadata.name")}},
		{name: "generateName invalid", obj: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder-x1", GenerateName: "Builder-", Namespace: "default"}}, errors: []want{inv("metadata.generateName")}},
	})
	old := stored(sa.DeepCopy())
	renamed := old.DeepCopy()
	renamed.Name = "other"
	uid := old.DeepCopy()
	uid.UID = "other"
	runUpdateCases(t, []updateCase{
		{name: "name immutable", old: old, obj: renamed, errors: []want{immutable("metadata.name")}},
		{name: "uid immutable", old: old, obj: uid, errors: []want{immutable("metadata.uid")}},
	})
}

func TestValidateCoreEvent(t *testing.T) {
	ev := func(mutate func(e *corev1.Event)) *corev1.Event {
		e := &corev1.Event{
			ObjectMeta:     objectMeta("web.17a2b"),
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
			Reason:         "Started", Message: "Started container", Type: corev1.EventTypeNormal,
		}
		mutate(e)
		return e
	}
	runCreateCases(t, []createCase{
		{name: "valid", obj: ev(func(*corev1.Event) {})},
		{name: "valid cluster-scoped object in default", obj: ev(func(e *corev1.Event) { e.InvolvedObject.Namespace = ""; e.InvolvedObject.Kind = "Node" })},
		{name: "namespace mismatch", obj: ev(func(e *corev1.Event) { e.InvolvedObject.Namespace = "kube-system" }), errors: []want{invd("involvedObject.namespace", "does not match event.namespace")}},
		{name: "new-style event needs reporting fields", obj: ev(func(e *corev1.Event) { e.EventTime = metav1.NewMicroTime(time.Now()) }),
			errors: []want{req("reportingController"), inv("reportingController"), inv("reportingController"), req("reportingInstance"), req("action")}},
	})
}

func TestValidateEventsV1(t *testing.T) {
	ev := func(mutate func(e *eventsv1.Event)) *eventsv1.Event {
		e := &eventsv1.Event{
			ObjectMeta:          objectMeta("web.17a2b"),
			EventTime:           metav1.NewMicroTime(time.Now()),
			ReportingController: "kubette.io/scheduler", ReportingInstance: "kubette-0",
			Action: "Binding", Reason: "Scheduled", Type: corev1.EventTypeNormal,
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
		}
		mutate(e)
		return e
	}
	runCreateCases(t, []createCase{
		{name: "valid", obj: ev(func(*eventsv1.Event) {})},
		{name: "eventTime required", obj: ev(func(e *eventsv1.Event) { e.EventTime = metav1.MicroTime{} }), errors: []want{req("eventTime")}},
		{name: "type invalid", obj: ev(func(e *eventsv1.Event) { e.Type = "Info" }), errors: []want{invd("type", "has invalid value: Info")}},
		{name: "deprecated fields unset", obj: ev(func(e *eventsv1.Event) { e.DeprecatedCount = 2 }), errors: []want{invd("count", "needs to be unset")}},
		{name: "series count", obj: ev(func(e *eventsv1.Event) {
			e.Series = &eventsv1.EventSeries{Count: 1, LastObservedTime: metav1.NewMicroTime(time.Now())}
		}),
			errors: []want{inv("series.count")}},
		{name: "name invalid", obj: ev(func(e *eventsv1.Event) { e.Name = "Web" }), errors: []want{inv("metadata.name")}},
	})
	old := stored(ev(func(*eventsv1.Event) {}))
	series := old.DeepCopy()
	series.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(time.Now())}
	renote := old.DeepCopy()
	renote.Note = "changed"
	runUpdateCases(t, []updateCase{
		{name: "series update", old: old, obj: series},
		{name: "note immutable", old: old, obj: renote, errors: []want{immutable("message")}},
	})
}

func TestValidateLease(t *testing.T) {
	lease := func(mutate func(l *coordinationv1.Lease)) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("node-1"), LeaseDurationSeconds: ptr(int32(40))}}
		mutate(l)
		return l
	}
	runCreateCases(t, []createCase{
		{name: "valid", obj: lease(func(*coordinationv1.Lease) {})},
		{name: "duration must be positive", obj: lease(func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr(int32(0)) }), errors: []want{inv("spec.leaseDurationSeconds")}},
		{name: "negative transitions", obj: lease(func(l *coordinationv1.Lease) { l.Spec.LeaseTransitions = ptr(int32(-1)) }), errors: []want{inv("spec.leaseTransitions")}},
		{name: "preferredHolder needs strategy", obj: lease(func(l *coordinationv1.Lease) { l.Spec.PreferredHolder = ptr("node-2") }), errors: []want{forb("spec.preferredHolder")}},
		{name: "non-standard finalizer allowed", obj: lease(func(l *coordinationv1.Lease) { l.Finalizers = []string{"example.com/x"} })},
	})
	old := stored(lease(func(*coordinationv1.Lease) {}))
	renewed := old.DeepCopy()
	renewed.Spec.RenewTime = ptr(metav1.NewMicroTime(time.Now()))
	runUpdateCases(t, []updateCase{{name: "renew", old: old, obj: renewed}})
}

func TestDispatch(t *testing.T) {
	if errs := ValidateCreate(&networkingv1.NetworkPolicy{}); errs != nil {
		t.Errorf("unknown kind: %v", errs)
	}
	if errs := ValidateCreate(nil); len(errs) != 1 || errs[0].Type != field.ErrorTypeInternal {
		t.Errorf("nil object: %v", errs)
	}
	if errs := ValidateCreate((*corev1.Pod)(nil)); len(errs) != 1 || errs[0].Type != field.ErrorTypeInternal {
		t.Errorf("typed nil object: %v", errs)
	}
	if errs := ValidateUpdate(validPod(), validService()); len(errs) != 1 || errs[0].Type != field.ErrorTypeInternal {
		t.Errorf("mismatched types: %v", errs)
	}
	// Kinds without a status subresource validate status updates as updates.
	old := stored(&corev1.ServiceAccount{ObjectMeta: objectMeta("sa")})
	renamed := old.DeepCopy()
	renamed.Name = "x"
	checkErrors(t, ValidateStatusUpdate(renamed, old), []want{immutable("metadata.name")})
}
