package validation

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxSecretSize is the limit on the total data of a Secret or ConfigMap (1 MiB).
const maxSecretSize = 1 * 1024 * 1024

// Namespaces.

func validateNamespace(ns *corev1.Namespace) field.ErrorList {
	errs := validateMeta(&ns.ObjectMeta, false, apimachineryvalidation.ValidateNamespaceName)
	return append(errs, validateNamespaceFinalizers(ns)...)
}

func validateNamespaceFinalizers(ns *corev1.Namespace) field.ErrorList {
	var errs field.ErrorList
	fldPath := field.NewPath("spec", "finalizers")
	for _, f := range ns.Spec.Finalizers {
		errs = append(errs, apimachineryvalidation.ValidateFinalizerName(string(f), fldPath)...)
		errs = append(errs, validateKubeFinalizerName(string(f), fldPath)...)
	}
	return errs
}

func validateNamespaceStatusUpdate(ns, old *corev1.Namespace) field.ErrorList {
	errs := validateMetaUpdate(&ns.ObjectMeta, &old.ObjectMeta)
	phasePath := field.NewPath("status", "Phase")
	if ns.DeletionTimestamp.IsZero() {
		if ns.Status.Phase != corev1.NamespaceActive {
			errs = append(errs, field.Invalid(phasePath, ns.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty"))
		}
	} else if ns.Status.Phase != corev1.NamespaceTerminating {
		errs = append(errs, field.Invalid(phasePath, ns.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty"))
	}
	return errs
}

// Nodes.

// nodePodCIDRs returns the node's pod CIDRs, taking the legacy singular field
// into account as the upstream conversion does.
func nodePodCIDRs(node *corev1.Node) []string {
	if len(node.Spec.PodCIDRs) > 0 {
		return node.Spec.PodCIDRs
	}
	if node.Spec.PodCIDR != "" {
		return []string{node.Spec.PodCIDR}
	}
	return nil
}

func validateNode(node *corev1.Node) field.ErrorList {
	errs := validateMeta(&node.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain)
	errs = append(errs, validateNodeSpecAndStatus(node, nil)...)
	return errs
}

// validateNodeSpecAndStatus holds the checks shared by create and update.
// Taint errors are reported under metadata.taints, as upstream does.
func validateNodeSpecAndStatus(node, old *corev1.Node) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateNodeTaints(node.Spec.Taints, field.NewPath("metadata", "taints"))...)
	for _, name := range sortedResourceNames(node.Status.Capacity) {
		errs = append(errs, validateResourceQuantityValue(string(name), node.Status.Capacity[name], field.NewPath("status", "capacity", string(name)))...)
	}
	for _, name := range sortedResourceNames(node.Status.Allocatable) {
		errs = append(errs, validateResourceQuantityValue(string(name), node.Status.Allocatable[name], field.NewPath("status", "allocatable", string(name)))...)
	}
	var oldCIDRs []string
	if old != nil {
		oldCIDRs = nodePodCIDRs(old)
	}
	cidrs := nodePodCIDRs(node)
	cidrPath := field.NewPath("spec", "podCIDRs")
	valid := true
	for i, cidr := range cidrs {
		e := validation.IsValidCIDRForLegacyField(cidrPath.Index(i), cidr, true, oldCIDRs)
		if len(e) > 0 {
			valid = false
		}
		errs = append(errs, e...)
	}
	if len(cidrs) > 1 && valid {
		if len(cidrs) > 2 || !isDualStack(cidrs[0], cidrs[1]) {
			errs = append(errs, field.Invalid(cidrPath, cidrs, "may specify no more than one CIDR for each IP family"))
		}
		seen := map[string]bool{}
		for i, c := range cidrs {
			if seen[c] {
				errs = append(errs, field.Duplicate(cidrPath.Index(i), c))
			}
			seen[c] = true
		}
	}
	return errs
}

func validateNodeTaints(taints []corev1.Taint, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	unique := map[corev1.TaintEffect]map[string]bool{}
	for i, t := range taints {
		idxPath := fldPath.Index(i)
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, idxPath.Child("key"))...)
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) != 0 {
			errs = append(errs, field.Invalid(idxPath.Child("value"), t.Value, strings.Join(msgs, ";")))
		}
		errs = append(errs, validateTaintEffect(t.Effect, false, idxPath.Child("effect"))...)
		if unique[t.Effect][t.Key] {
			dup := field.Duplicate(idxPath, t)
			dup.Detail = "taints must be unique by key and effect pair"
			errs = append(errs, dup)
			continue
		}
		if unique[t.Effect] == nil {
			unique[t.Effect] = map[string]bool{}
		}
		unique[t.Effect][t.Key] = true
	}
	return errs
}

func validateNodeUpdate(node, old *corev1.Node) field.ErrorList {
	errs := validateMetaUpdate(&node.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateNodeSpecAndStatus(node, old)...)
	seen := map[corev1.NodeAddress]bool{}
	for i, addr := range node.Status.Addresses {
		if seen[addr] {
			errs = append(errs, field.Duplicate(field.NewPath("status", "addresses").Index(i), addr))
		}
		seen[addr] = true
	}
	// The pod CIDRs may only go from unset to set.
	if oldCIDRs := nodePodCIDRs(old); len(oldCIDRs) > 0 {
		newCIDRs := nodePodCIDRs(node)
		changed := len(oldCIDRs) != len(newCIDRs)
		for i := 0; !changed && i < len(oldCIDRs); i++ {
			changed = oldCIDRs[i] != newCIDRs[i]
		}
		if changed {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "podCIDRs"), "node updates may not change podCIDR except from \"\" to valid"))
		}
	}
	if old.Spec.ProviderID != "" && old.Spec.ProviderID != node.Spec.ProviderID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "providerID"), "node updates may not change providerID except from \"\" to valid"))
	}
	if node.Spec.DoNotUseExternalID != old.Spec.DoNotUseExternalID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "externalID"), "may not be updated"))
	}
	return errs
}

// ConfigMaps and Secrets.

func validateConfigKeys[V any](data map[string]V, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, key := range sortedKeys(data) {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(fldPath.Key(key), key, msg))
		}
	}
	return errs
}

func validateConfigMapData(cm *corev1.ConfigMap) field.ErrorList {
	errs := validateConfigKeys(cm.Data, field.NewPath("data"))
	errs = append(errs, validateConfigKeys(cm.BinaryData, field.NewPath("binaryData"))...)
	total := 0
	for _, key := range sortedKeys(cm.Data) {
		if _, dup := cm.BinaryData[key]; dup {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, "duplicate of key present in binaryData"))
		}
		total += len(cm.Data[key])
	}
	for _, v := range cm.BinaryData {
		total += len(v)
	}
	if total > maxSecretSize {
		// An empty path refers to the whole object, as upstream reports it.
		errs = append(errs, field.TooLong(field.NewPath(""), "", maxSecretSize))
	}
	return errs
}

func validateConfigMapUpdate(cm, old *corev1.ConfigMap) field.ErrorList {
	errs := validateMetaUpdate(&cm.ObjectMeta, &old.ObjectMeta)
	if old.Immutable != nil && *old.Immutable {
		if cm.Immutable == nil || !*cm.Immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(emptyToNil(cm.Data), emptyToNil(old.Data)) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(emptyToNil(cm.BinaryData), emptyToNil(old.BinaryData)) {
			errs = append(errs, field.Forbidden(field.NewPath("binaryData"), "field is immutable when `immutable` is set"))
		}
	}
	return append(errs, validateConfigMapData(cm)...)
}

// emptyToNil treats an empty map like an absent one (defaulting may turn
// one into the other).
func emptyToNil[V any](m map[string]V) map[string]V {
	if len(m) == 0 {
		return nil
	}
	return m
}

func validateSecretData(s *corev1.Secret) field.ErrorList {
	dataPath := field.NewPath("data")
	errs := validateConfigKeys(s.Data, dataPath)
	total := 0
	for _, v := range s.Data {
		total += len(v)
	}
	if total > maxSecretSize {
		errs = append(errs, field.TooLong(dataPath, "", maxSecretSize))
	}
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg:
		errs = append(errs, validateSecretJSONKey(s, corev1.DockerConfigKey, dataPath)...)
	case corev1.SecretTypeDockerConfigJson:
		errs = append(errs, validateSecretJSONKey(s, corev1.DockerConfigJsonKey, dataPath)...)
	case corev1.SecretTypeBasicAuth:
		_, hasUser := s.Data[corev1.BasicAuthUsernameKey]
		_, hasPassword := s.Data[corev1.BasicAuthPasswordKey]
		if !hasUser && !hasPassword {
			errs = append(errs, field.Required(dataPath.Key(corev1.BasicAuthUsernameKey), ""))
			errs = append(errs, field.Required(dataPath.Key(corev1.BasicAuthPasswordKey), ""))
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(dataPath.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		if _, ok := s.Data[corev1.TLSCertKey]; !ok {
			errs = append(errs, field.Required(dataPath.Key(corev1.TLSCertKey), ""))
		}
		if _, ok := s.Data[corev1.TLSPrivateKeyKey]; !ok {
			errs = append(errs, field.Required(dataPath.Key(corev1.TLSPrivateKeyKey), ""))
		}
	}
	return errs
}

func validateSecretJSONKey(s *corev1.Secret, key string, dataPath *field.Path) field.ErrorList {
	raw, ok := s.Data[key]
	if !ok {
		return field.ErrorList{field.Required(dataPath.Key(key), "")}
	}
	if err := json.Unmarshal(raw, &map[string]interface{}{}); err != nil {
		return field.ErrorList{field.Invalid(dataPath.Key(key), "<secret contents redacted>", err.Error())}
	}
	return nil
}

func validateSecretUpdate(s, old *corev1.Secret) field.ErrorList {
	errs := validateMetaUpdate(&s.ObjectMeta, &old.ObjectMeta)
	newType := s.Type
	if newType == "" {
		// A request without a type keeps the stored one.
		newType = old.Type
	}
	errs = append(errs, validateImmutable(newType, old.Type, field.NewPath("type"))...)
	if old.Immutable != nil && *old.Immutable {
		if s.Immutable == nil || !*s.Immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(emptyToNil(s.Data), emptyToNil(old.Data)) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
	}
	return append(errs, validateSecretData(s)...)
}

// Leases.

func validateLeaseSpec(spec *coordinationv1.LeaseSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.LeaseDurationSeconds != nil && *spec.LeaseDurationSeconds <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("leaseDurationSeconds"), spec.LeaseDurationSeconds, "must be greater than 0"))
	}
	if spec.LeaseTransitions != nil && *spec.LeaseTransitions < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("leaseTransitions"), spec.LeaseTransitions, "must be greater than or equal to 0"))
	}
	if spec.Strategy != nil {
		strategy := *spec.Strategy
		if !strings.Contains(string(strategy), "/") {
			if strategy != coordinationv1.OldestEmulationVersion {
				errs = append(errs, field.NotSupported(fldPath.Child("strategy").Child("strategy"), strategy, []coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion}))
			}
		} else {
			for _, msg := range validation.IsQualifiedName(string(strategy)) {
				errs = append(errs, field.Invalid(fldPath.Child("strategy").Child("strategy"), strategy, msg))
			}
		}
	}
	if spec.PreferredHolder != nil && *spec.PreferredHolder != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		errs = append(errs, field.Forbidden(fldPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

// Events.

const (
	reportingInstanceLengthLimit = 128
	actionLengthLimit            = 128
	reasonLengthLimit            = 128
	noteLengthLimit              = 1024
)

// validateCoreEventCreate validates a core/v1 Event. Upstream only applies the
// legacy event rules to the v1 API (no metadata validation); the name must
// still be present to store the object.
func validateCoreEventCreate(ev *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if ev.Name == "" && ev.GenerateName == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "name"), "name or generateName is required"))
	}
	return append(errs, legacyValidateEvent(ev)...)
}

func validateCoreEventUpdate(ev, old *corev1.Event) field.ErrorList {
	return legacyValidateEvent(ev)
}

func legacyValidateEvent(ev *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	nsPath := field.NewPath("involvedObject", "namespace")
	if ev.EventTime.IsZero() {
		if ev.InvolvedObject.Namespace == "" {
			if ev.Namespace != metav1.NamespaceNone && ev.Namespace != metav1.NamespaceDefault {
				errs = append(errs, field.Invalid(nsPath, ev.InvolvedObject.Namespace, "does not match event.namespace"))
			}
		} else if ev.Namespace != ev.InvolvedObject.Namespace {
			errs = append(errs, field.Invalid(nsPath, ev.InvolvedObject.Namespace, "does not match event.namespace"))
		}
	} else {
		if ev.InvolvedObject.Namespace == "" && ev.Namespace != metav1.NamespaceDefault && ev.Namespace != metav1.NamespaceSystem {
			errs = append(errs, field.Invalid(nsPath, ev.InvolvedObject.Namespace, "does not match event.namespace"))
		}
		if ev.ReportingController == "" {
			errs = append(errs, field.Required(field.NewPath("reportingController"), ""))
		}
		for _, msg := range validation.IsQualifiedName(ev.ReportingController) {
			errs = append(errs, field.Invalid(field.NewPath("reportingController"), ev.ReportingController, msg))
		}
		if ev.ReportingInstance == "" {
			errs = append(errs, field.Required(field.NewPath("reportingInstance"), ""))
		}
		if len(ev.ReportingInstance) > reportingInstanceLengthLimit {
			errs = append(errs, field.Invalid(field.NewPath("reportingInstance"), "", fmt.Sprintf("can have at most %v characters", reportingInstanceLengthLimit)))
		}
		if ev.Action == "" {
			errs = append(errs, field.Required(field.NewPath("action"), ""))
		}
		if len(ev.Action) > actionLengthLimit {
			errs = append(errs, field.Invalid(field.NewPath("action"), "", fmt.Sprintf("can have at most %v characters", actionLengthLimit)))
		}
		if ev.Reason == "" {
			errs = append(errs, field.Required(field.NewPath("reason"), ""))
		}
		if len(ev.Reason) > reasonLengthLimit {
			errs = append(errs, field.Invalid(field.NewPath("reason"), "", fmt.Sprintf("can have at most %v characters", reasonLengthLimit)))
		}
		if len(ev.Message) > noteLengthLimit {
			errs = append(errs, field.Invalid(field.NewPath("message"), "", fmt.Sprintf("can have at most %v characters", noteLengthLimit)))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(ev.Namespace) {
		errs = append(errs, field.Invalid(field.NewPath("namespace"), ev.Namespace, msg))
	}
	return errs
}

// eventsV1ToCore maps an events.k8s.io/v1 Event onto the core Event fields
// upstream validates (errors therefore carry the core field names, as upstream).
func eventsV1ToCore(ev *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		ObjectMeta:          ev.ObjectMeta,
		InvolvedObject:      ev.Regarding,
		Reason:              ev.Reason,
		Message:             ev.Note,
		Source:              ev.DeprecatedSource,
		FirstTimestamp:      ev.DeprecatedFirstTimestamp,
		LastTimestamp:       ev.DeprecatedLastTimestamp,
		Count:               ev.DeprecatedCount,
		Type:                ev.Type,
		EventTime:           ev.EventTime,
		Action:              ev.Action,
		Related:             ev.Related,
		ReportingController: ev.ReportingController,
		ReportingInstance:   ev.ReportingInstance,
	}
	if ev.Series != nil {
		out.Series = &corev1.EventSeries{Count: ev.Series.Count, LastObservedTime: ev.Series.LastObservedTime}
	}
	return out
}

func validateEventSeries(ev *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if ev.Series != nil {
		if ev.Series.Count < 2 {
			errs = append(errs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
		}
		if ev.Series.LastObservedTime.IsZero() {
			errs = append(errs, field.Required(field.NewPath("series.lastObservedTime"), ""))
		}
	}
	return errs
}

func validateEventsV1Create(in *eventsv1.Event) field.ErrorList {
	ev := eventsV1ToCore(in)
	errs := legacyValidateEvent(ev)
	errs = append(errs, validateMeta(&ev.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)...)
	errs = append(errs, validateEventSeries(ev)...)
	if ev.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if ev.Type != corev1.EventTypeNormal && ev.Type != corev1.EventTypeWarning {
		errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", ev.Type)))
	}
	if !ev.FirstTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("firstTimestamp"), "", "needs to be unset"))
	}
	if !ev.LastTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("lastTimestamp"), "", "needs to be unset"))
	}
	if ev.Count != 0 {
		errs = append(errs, field.Invalid(field.NewPath("count"), "", "needs to be unset"))
	}
	if ev.Source.Component != "" || ev.Source.Host != "" {
		errs = append(errs, field.Invalid(field.NewPath("source"), "", "needs to be unset"))
	}
	return errs
}

func validateEventsV1Update(in, oldIn *eventsv1.Event) field.ErrorList {
	ev, old := eventsV1ToCore(in), eventsV1ToCore(oldIn)
	errs := legacyValidateEvent(ev)
	errs = append(errs, validateMetaUpdate(&ev.ObjectMeta, &old.ObjectMeta)...)
	if !reflect.DeepEqual(ev.Series, old.Series) {
		errs = append(errs, validateEventSeries(ev)...)
	}
	immutable := []struct {
		name     string
		new, old interface{}
	}{
		{"involvedObject", ev.InvolvedObject, old.InvolvedObject},
		{"reason", ev.Reason, old.Reason},
		{"message", ev.Message, old.Message},
		{"source", ev.Source, old.Source},
		{"firstTimestamp", ev.FirstTimestamp, old.FirstTimestamp},
		{"lastTimestamp", ev.LastTimestamp, old.LastTimestamp},
		{"count", ev.Count, old.Count},
		{"type", ev.Type, old.Type},
		{"eventTime", ev.EventTime, old.EventTime},
		{"action", ev.Action, old.Action},
		{"related", ev.Related, old.Related},
		{"reportingController", ev.ReportingController, old.ReportingController},
		{"reportingInstance", ev.ReportingInstance, old.ReportingInstance},
	}
	for _, f := range immutable {
		errs = append(errs, validateImmutable(f.new, f.old, field.NewPath(f.name))...)
	}
	return errs
}

// sortedKeys returns the keys of m in ascending order so that error lists are
// deterministic.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
