package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func errText(errs field.ErrorList) string { return errs.ToAggregate().Error() }

func TestValidateResourceQuota(t *testing.T) {
	q := func(hard corev1.ResourceList, scopes ...corev1.ResourceQuotaScope) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}, Spec: corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes}}
	}
	ok := []*corev1.ResourceQuota{
		q(corev1.ResourceList{"pods": resource.MustParse("3"), "requests.cpu": resource.MustParse("500m"), "count/deployments.apps": resource.MustParse("2")}),
		q(corev1.ResourceList{"pods": resource.MustParse("3")}, corev1.ResourceQuotaScopeBestEffort),
		q(corev1.ResourceList{"memory": resource.MustParse("1Gi")}, corev1.ResourceQuotaScopeNotTerminating),
	}
	for _, o := range ok {
		if errs := ValidateResourceQuota(o); len(errs) != 0 {
			t.Errorf("%v: %v", o.Spec, errs)
		}
	}
	bad := map[string]*corev1.ResourceQuota{
		`spec.hard[bogus]: Invalid value: "bogus": must be a standard resource for quota`: q(corev1.ResourceList{"bogus": resource.MustParse("1")}),
		`spec.hard[pods]: Invalid value: "1500m": must be an integer`:                     q(corev1.ResourceList{"pods": resource.MustParse("1.5")}),
		`spec.hard[cpu]: Invalid value: "-1": must be greater than or equal to 0`:         q(corev1.ResourceList{"cpu": resource.MustParse("-1")}),
		`unsupported scope applied to resource`:                                           q(corev1.ResourceList{"cpu": resource.MustParse("1")}, corev1.ResourceQuotaScopeBestEffort),
		`conflicting scopes`:                                                              q(corev1.ResourceList{"pods": resource.MustParse("1")}, corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating),
		`spec.scopes: Invalid value: ["Nope"]: unsupported scope`:                         q(nil, "Nope"),
	}
	for want, o := range bad {
		if got := errText(ValidateResourceQuota(o)); !strings.Contains(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	old := q(nil, corev1.ResourceQuotaScopeBestEffort)
	old.ResourceVersion = "1"
	upd := q(nil, corev1.ResourceQuotaScopeNotBestEffort)
	if got := errText(ValidateResourceQuotaUpdate(upd, old)); !strings.Contains(got, "spec.scopes") || !strings.Contains(got, "field is immutable") {
		t.Errorf("scope change: %q", got)
	}
}

func TestValidateLimitRange(t *testing.T) {
	lr := func(items ...corev1.LimitRangeItem) *corev1.LimitRange {
		return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns"}, Spec: corev1.LimitRangeSpec{Limits: items}}
	}
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	good := lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "100m"), Max: rl("cpu", "1"), Default: rl("cpu", "500m"), DefaultRequest: rl("cpu", "200m"), MaxLimitRequestRatio: rl("cpu", "5")},
		corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("memory", "1Gi")},
		corev1.LimitRangeItem{Type: corev1.LimitTypePersistentVolumeClaim, Min: rl("storage", "1Gi")})
	if errs := ValidateLimitRange(good); len(errs) != 0 {
		t.Fatal(errs)
	}
	bad := map[string]*corev1.LimitRange{
		`spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max value 1`:                   lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "2"), Max: rl("cpu", "1")}),
		"spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'":                           lr(corev1.LimitRangeItem{Type: corev1.LimitTypePod, Default: rl("cpu", "1")}),
		`spec.limits[1].type: Duplicate value: "Container"`:                                                      lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer}, corev1.LimitRangeItem{Type: corev1.LimitTypeContainer}),
		`either minimum or maximum storage value is required`:                                                    lr(corev1.LimitRangeItem{Type: corev1.LimitTypePersistentVolumeClaim}),
		`spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: "500m": ratio 500m is less than 1`:             lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: rl("cpu", "0.5")}),
		`spec.limits[0].type: Invalid value: "Bogus": must be a standard limit type or fully qualified`:          lr(corev1.LimitRangeItem{Type: "Bogus"}),
		`spec.limits[0].defaultRequest[memory]: Invalid value: "2Gi": default request value 2Gi is greater than`: lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: rl("memory", "1Gi"), DefaultRequest: rl("memory", "2Gi")}),
	}
	for want, o := range bad {
		if got := errText(ValidateLimitRange(o)); !strings.Contains(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestValidatePriorityClass(t *testing.T) {
	pc := func(name string, value int32) *schedulingv1.PriorityClass {
		return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	}
	for _, s := range SystemPriorityClasses() {
		if errs := ValidatePriorityClass(s); len(errs) != 0 {
			t.Errorf("%s: %v", s.Name, errs)
		}
	}
	if errs := ValidatePriorityClass(pc("high", 1000000000)); len(errs) != 0 {
		t.Error(errs)
	}
	bad := map[string]*schedulingv1.PriorityClass{
		"metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class":               pc("system-mine", 1),
		"metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: value of system-node-critical PriorityClass must be 2000001000": pc("system-node-critical", 5),
		"value: Forbidden: maximum allowed value of a user defined priority is 1000000000":                                                                                             pc("big", 1000000001),
	}
	for want, o := range bad {
		if got := errText(ValidatePriorityClass(o)); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	old, upd := pc("a", 1), pc("a", 2)
	old.ResourceVersion = "1"
	if got := errText(ValidatePriorityClassUpdate(upd, old)); got != "value: Forbidden: may not be changed in an update." {
		t.Errorf("value change: %q", got)
	}
}
