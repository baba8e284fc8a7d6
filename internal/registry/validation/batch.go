package validation

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits of upstream's Job validation.
const (
	maxParallelismForIndexedJob = 100000
	maxFailedIndexesLimit       = 100000
	maxPodFailurePolicyRules    = 20
	maxExitCodeValues           = 255
	maxPodConditionPatterns     = 20
	maxSuccessPolicyRules       = 20
	maxManagedByLength          = 63
	// maxCronJobNameLength leaves room for the 11-character suffix of its Jobs' names.
	maxCronJobNameLength = 52
)

const (
	legacyControllerUIDLabel = "controller-uid"
	legacyJobNameLabel       = "job-name"
)

// jobOptions say which of upstream's rules apply: a Job template may omit its
// selector (the CronJob controller's Jobs get one generated).
type jobOptions struct {
	allowMissingSelector bool
}

func validateJob(job *batchv1.Job) field.ErrorList {
	errs := validateMeta(&job.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	if job.Spec.ManualSelector == nil || !*job.Spec.ManualSelector {
		errs = append(errs, validateGeneratedSelector(job)...)
	}
	return append(errs, validateJobSpec(&job.Spec, field.NewPath("spec"), jobOptions{})...)
}

// validateGeneratedSelector checks that a Job without a manual selector carries the
// selector and template labels the server generated from its UID.
func validateGeneratedSelector(job *batchv1.Job) field.ErrorList {
	var errs field.ErrorList
	if job.Spec.Selector == nil {
		return errs // reported by the spec validation
	}
	uid := string(job.UID)
	lblPath := field.NewPath("spec", "template", "metadata", "labels")
	for _, key := range []string{legacyControllerUIDLabel, batchv1.ControllerUidLabel} {
		if v, ok := job.Spec.Template.Labels[key]; ok && v != uid {
			errs = append(errs, field.Invalid(lblPath.Key(key), v, "must be '"+uid+"'"))
		}
	}
	for _, key := range []string{legacyJobNameLabel, batchv1.JobNameLabel} {
		if v, ok := job.Spec.Template.Labels[key]; ok && v != job.Name {
			errs = append(errs, field.Invalid(lblPath.Key(key), v, "must be '"+job.Name+"'"))
		}
	}
	sel := job.Spec.Selector
	if len(sel.MatchExpressions) != 0 || len(sel.MatchLabels) != 1 || sel.MatchLabels[batchv1.ControllerUidLabel] != uid {
		errs = append(errs, field.Invalid(field.NewPath("spec", "selector"), sel, "`selector` not auto-generated"))
	}
	return errs
}

func validateJobSpec(spec *batchv1.JobSpec, fldPath *field.Path, opts jobOptions) field.ErrorList {
	var errs field.ErrorList
	if spec.Parallelism != nil {
		errs = append(errs, validateNonnegative(int64(*spec.Parallelism), fldPath.Child("parallelism"))...)
	}
	if spec.Completions != nil {
		errs = append(errs, validateNonnegative(int64(*spec.Completions), fldPath.Child("completions"))...)
	}
	if spec.ActiveDeadlineSeconds != nil && *spec.ActiveDeadlineSeconds <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("activeDeadlineSeconds"), *spec.ActiveDeadlineSeconds, isNotPositiveErrorMsg))
	}
	if spec.BackoffLimit != nil {
		errs = append(errs, validateNonnegative(int64(*spec.BackoffLimit), fldPath.Child("backoffLimit"))...)
	}
	if spec.TTLSecondsAfterFinished != nil {
		errs = append(errs, validateNonnegative(int64(*spec.TTLSecondsAfterFinished), fldPath.Child("ttlSecondsAfterFinished"))...)
	}
	indexed := spec.CompletionMode != nil && *spec.CompletionMode == batchv1.IndexedCompletion
	switch {
	case spec.CompletionMode == nil:
		if !opts.allowMissingSelector {
			errs = append(errs, field.Required(fldPath.Child("completionMode"), ""))
		}
	case *spec.CompletionMode != batchv1.NonIndexedCompletion && *spec.CompletionMode != batchv1.IndexedCompletion:
		errs = append(errs, field.NotSupported(fldPath.Child("completionMode"), *spec.CompletionMode,
			[]string{string(batchv1.NonIndexedCompletion), string(batchv1.IndexedCompletion)}))
	}
	if indexed {
		if spec.Completions == nil {
			errs = append(errs, field.Required(fldPath.Child("completions"), "when completion mode is "+string(batchv1.IndexedCompletion)))
		}
		if spec.Parallelism != nil && *spec.Parallelism > maxParallelismForIndexedJob {
			errs = append(errs, field.Invalid(fldPath.Child("parallelism"), *spec.Parallelism,
				fmt.Sprintf("must be less than or equal to %d when completion mode is %s", maxParallelismForIndexedJob, batchv1.IndexedCompletion)))
		}
	}
	if spec.BackoffLimitPerIndex != nil {
		errs = append(errs, validateNonnegative(int64(*spec.BackoffLimitPerIndex), fldPath.Child("backoffLimitPerIndex"))...)
		if !indexed {
			errs = append(errs, field.Forbidden(fldPath.Child("backoffLimitPerIndex"), "requires indexed completion mode"))
		}
		if spec.Completions != nil && *spec.Completions > maxFailedIndexesLimit {
			errs = append(errs, field.Invalid(fldPath.Child("completions"), *spec.Completions,
				fmt.Sprintf("must be less than or equal to %d when backoffLimitPerIndex is specified", maxFailedIndexesLimit)))
		}
	}
	if spec.MaxFailedIndexes != nil {
		p := fldPath.Child("maxFailedIndexes")
		if spec.BackoffLimitPerIndex == nil {
			errs = append(errs, field.Required(fldPath.Child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
		}
		errs = append(errs, validateNonnegative(int64(*spec.MaxFailedIndexes), p)...)
		if *spec.MaxFailedIndexes > maxFailedIndexesLimit {
			errs = append(errs, field.Invalid(p, *spec.MaxFailedIndexes, fmt.Sprintf("must be less than or equal to %d", maxFailedIndexesLimit)))
		}
		if spec.Completions != nil && *spec.MaxFailedIndexes > *spec.Completions {
			errs = append(errs, field.Invalid(p, *spec.MaxFailedIndexes, "must be less than or equal to completions"))
		}
	}
	if spec.ManagedBy != nil {
		p := fldPath.Child("managedBy")
		if len(*spec.ManagedBy) > maxManagedByLength {
			errs = append(errs, field.TooLongMaxLength(p, *spec.ManagedBy, maxManagedByLength))
		}
		errs = append(errs, validateDomainPrefixedPath(p, *spec.ManagedBy)...)
	}

	selPath := fldPath.Child("selector")
	if spec.Selector == nil {
		if !opts.allowMissingSelector {
			errs = append(errs, field.Required(selPath, ""))
		}
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
		if sel, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil && !sel.Matches(labels.Set(spec.Template.Labels)) {
			errs = append(errs, field.Invalid(fldPath.Child("template", "metadata", "labels"), spec.Template.Labels, "`selector` does not match template `labels`"))
		}
	}

	tmplPath := fldPath.Child("template")
	errs = append(errs, validatePodTemplateSpec(&spec.Template, tmplPath)...)
	rp := spec.Template.Spec.RestartPolicy
	if spec.PodFailurePolicy != nil {
		if rp != corev1.RestartPolicyNever {
			errs = append(errs, field.Invalid(tmplPath.Child("spec", "restartPolicy"), rp,
				"only \"Never\" is supported when podFailurePolicy is specified"))
		}
		errs = append(errs, validatePodFailurePolicy(spec, fldPath.Child("podFailurePolicy"))...)
	} else if rp != corev1.RestartPolicyOnFailure && rp != corev1.RestartPolicyNever {
		errs = append(errs, field.NotSupported(tmplPath.Child("spec", "restartPolicy"), rp,
			[]string{string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever)}))
	}
	if spec.PodReplacementPolicy != nil {
		p := fldPath.Child("podReplacementPolicy")
		switch *spec.PodReplacementPolicy {
		case batchv1.Failed:
		case batchv1.TerminatingOrFailed:
			if spec.PodFailurePolicy != nil {
				errs = append(errs, field.NotSupported(p, *spec.PodReplacementPolicy, []string{string(batchv1.Failed)}))
			}
		default:
			errs = append(errs, field.NotSupported(p, *spec.PodReplacementPolicy,
				[]string{string(batchv1.Failed), string(batchv1.TerminatingOrFailed)}))
		}
	}
	if spec.SuccessPolicy != nil {
		errs = append(errs, validateSuccessPolicy(spec, fldPath.Child("successPolicy"))...)
	}
	return errs
}

// validateDomainPrefixedPath checks a value such as "example.com/controller".
func validateDomainPrefixedPath(p *field.Path, v string) field.ErrorList {
	domain, path, ok := strings.Cut(v, "/")
	if !ok || domain == "" || path == "" {
		return field.ErrorList{field.Invalid(p, v, "must be a domain-prefixed path (such as \"acme.io/foo\")")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(domain) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

func validatePodFailurePolicy(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	rules := spec.PodFailurePolicy.Rules
	rulesPath := fldPath.Child("rules")
	if len(rules) > maxPodFailurePolicyRules {
		errs = append(errs, field.TooMany(rulesPath, len(rules), maxPodFailurePolicyRules))
	}
	containers := sets.New[string]()
	for _, c := range spec.Template.Spec.Containers {
		containers.Insert(c.Name)
	}
	for _, c := range spec.Template.Spec.InitContainers {
		containers.Insert(c.Name)
	}
	actions := []string{string(batchv1.PodFailurePolicyActionFailJob), string(batchv1.PodFailurePolicyActionFailIndex),
		string(batchv1.PodFailurePolicyActionIgnore), string(batchv1.PodFailurePolicyActionCount)}
	for i, rule := range rules {
		rp := rulesPath.Index(i)
		switch rule.Action {
		case batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyActionCount:
		case batchv1.PodFailurePolicyActionFailIndex:
			if spec.BackoffLimitPerIndex == nil {
				errs = append(errs, field.Forbidden(rp.Child("action"), "requires the backoffLimitPerIndex to be set"))
			}
		default:
			errs = append(errs, field.NotSupported(rp.Child("action"), rule.Action, actions))
		}
		switch {
		case rule.OnExitCodes != nil && len(rule.OnPodConditions) > 0:
			errs = append(errs, field.Invalid(rp, field.OmitValueType{}, "specifying both OnExitCodes and OnPodConditions is not supported"))
		case rule.OnExitCodes == nil && len(rule.OnPodConditions) == 0:
			errs = append(errs, field.Invalid(rp, field.OmitValueType{}, "specifying one of OnExitCodes and OnPodConditions is required"))
		}
		if r := rule.OnExitCodes; r != nil {
			ep := rp.Child("onExitCodes")
			if r.ContainerName != nil && !containers.Has(*r.ContainerName) {
				errs = append(errs, field.Invalid(ep.Child("containerName"), *r.ContainerName,
					"must be one of the container or initContainer names in the pod template"))
			}
			switch r.Operator {
			case batchv1.PodFailurePolicyOnExitCodesOpIn, batchv1.PodFailurePolicyOnExitCodesOpNotIn:
			default:
				errs = append(errs, field.NotSupported(ep.Child("operator"), r.Operator,
					[]string{string(batchv1.PodFailurePolicyOnExitCodesOpIn), string(batchv1.PodFailurePolicyOnExitCodesOpNotIn)}))
			}
			vp := ep.Child("values")
			if len(r.Values) == 0 {
				errs = append(errs, field.Invalid(vp, r.Values, "at least one value is required"))
			}
			if len(r.Values) > maxExitCodeValues {
				errs = append(errs, field.TooMany(vp, len(r.Values), maxExitCodeValues))
			}
			seen := sets.New[int32]()
			for j, v := range r.Values {
				if r.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && v == 0 {
					errs = append(errs, field.Invalid(vp.Index(j), v, "must not be 0 for the In operator"))
				}
				if seen.Has(v) {
					errs = append(errs, field.Duplicate(vp.Index(j), v))
				} else {
					seen.Insert(v)
				}
				if j > 0 && r.Values[j-1] > v {
					errs = append(errs, field.Invalid(vp.Index(j), v, "must be ordered"))
				}
			}
		}
		cp := rp.Child("onPodConditions")
		if len(rule.OnPodConditions) > maxPodConditionPatterns {
			errs = append(errs, field.TooMany(cp, len(rule.OnPodConditions), maxPodConditionPatterns))
		}
		for j, pat := range rule.OnPodConditions {
			pp := cp.Index(j)
			switch pat.Status {
			case corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown:
			default:
				errs = append(errs, field.NotSupported(pp.Child("status"), pat.Status,
					[]string{string(corev1.ConditionTrue), string(corev1.ConditionFalse), string(corev1.ConditionUnknown)}))
			}
			for _, msg := range validation.IsQualifiedName(string(pat.Type)) {
				errs = append(errs, field.Invalid(pp.Child("type"), pat.Type, msg))
			}
		}
	}
	return errs
}

func validateSuccessPolicy(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion {
		errs = append(errs, field.Invalid(fldPath, field.OmitValueType{}, "requires indexed completion mode"))
	}
	rules := spec.SuccessPolicy.Rules
	rulesPath := fldPath.Child("rules")
	if len(rules) == 0 {
		errs = append(errs, field.Required(rulesPath, "at least one rules must be specified when the successPolicy is specified"))
	}
	if len(rules) > maxSuccessPolicyRules {
		errs = append(errs, field.TooMany(rulesPath, len(rules), maxSuccessPolicyRules))
	}
	completions := int32(0)
	if spec.Completions != nil {
		completions = *spec.Completions
	}
	for i, rule := range rules {
		rp := rulesPath.Index(i)
		if rule.SucceededIndexes == nil && rule.SucceededCount == nil {
			errs = append(errs, field.Required(rp, "at least one of succeededCount or succeededIndexes must be specified"))
		}
		var total int32
		if rule.SucceededIndexes != nil {
			n, err := countIndexes(*rule.SucceededIndexes, completions)
			if err != nil {
				errs = append(errs, field.Invalid(rp.Child("succeededIndexes"), *rule.SucceededIndexes, err.Error()))
			}
			total = n
		}
		if rule.SucceededCount != nil {
			cp := rp.Child("succeededCount")
			if *rule.SucceededCount < 0 {
				errs = append(errs, field.Invalid(cp, *rule.SucceededCount, "must be greater than or equal to 0"))
			}
			if *rule.SucceededCount > completions {
				errs = append(errs, field.Invalid(cp, *rule.SucceededCount, fmt.Sprintf("must be less than or equal to %d (the number of specified completions)", completions)))
			}
			if rule.SucceededIndexes != nil && *rule.SucceededCount > total {
				errs = append(errs, field.Invalid(cp, *rule.SucceededCount, fmt.Sprintf("must be less than or equal to %d (the number of indexes in the specified succeededIndexes field)", total)))
			}
		}
	}
	return errs
}

// countIndexes parses an index set such as "1,3-5" (ordered, below completions) and
// returns how many indexes it holds.
func countIndexes(s string, completions int32) (int32, error) {
	var total int32
	last := int64(-1)
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseInt(lo, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("error parsing %q: %v", part, err)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseInt(hi, 10, 32); err != nil {
				return 0, fmt.Errorf("error parsing %q: %v", part, err)
			}
		}
		if a > b {
			return 0, fmt.Errorf("range %q is not ordered", part)
		}
		if a <= last {
			return 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", last, a)
		}
		if b >= int64(completions) {
			return 0, fmt.Errorf("too large: %d", b)
		}
		last = b
		total += int32(b - a + 1)
	}
	return total, nil
}

func validateJobUpdate(job, old *batchv1.Job) field.ErrorList {
	errs := validateMetaUpdate(&job.ObjectMeta, &old.ObjectMeta)
	if job.Spec.ManualSelector == nil || !*job.Spec.ManualSelector {
		errs = append(errs, validateGeneratedSelector(job)...)
	}
	errs = append(errs, validateJobSpec(&job.Spec, field.NewPath("spec"), jobOptions{})...)
	spec, prev := &job.Spec, &old.Spec
	p := field.NewPath("spec")
	errs = append(errs, validateImmutable(spec.Selector, prev.Selector, p.Child("selector"))...)
	errs = append(errs, validateImmutable(spec.CompletionMode, prev.CompletionMode, p.Child("completionMode"))...)
	errs = append(errs, validateImmutable(spec.PodFailurePolicy, prev.PodFailurePolicy, p.Child("podFailurePolicy"))...)
	errs = append(errs, validateImmutable(spec.BackoffLimitPerIndex, prev.BackoffLimitPerIndex, p.Child("backoffLimitPerIndex"))...)
	errs = append(errs, validateImmutable(spec.ManagedBy, prev.ManagedBy, p.Child("managedBy"))...)
	errs = append(errs, validateImmutable(spec.SuccessPolicy, prev.SuccessPolicy, p.Child("successPolicy"))...)
	// An Indexed Job scales elastically: completions may change with parallelism,
	// keeping the two equal.
	elastic := spec.CompletionMode != nil && *spec.CompletionMode == batchv1.IndexedCompletion &&
		spec.Completions != nil && spec.Parallelism != nil && *spec.Completions == *spec.Parallelism &&
		prev.Completions != nil && prev.Parallelism != nil && *prev.Completions == *prev.Parallelism
	if !elastic {
		errs = append(errs, validateImmutable(spec.Completions, prev.Completions, p.Child("completions"))...)
	}
	errs = append(errs, validateJobTemplateUpdate(job, old)...)
	return errs
}

// validateJobTemplateUpdate allows the pod template to change only where upstream
// does: the scheduling directives (node affinity, node selector, tolerations,
// scheduling gates) and the template's labels and annotations of a suspended Job
// that never started.
func validateJobTemplateUpdate(job, old *batchv1.Job) field.ErrorList {
	tmpl := job.Spec.Template.DeepCopy()
	prev := &old.Spec.Template
	mutable := job.Spec.Suspend != nil && *job.Spec.Suspend && old.Status.StartTime == nil
	if mutable {
		tmpl.Labels, tmpl.Annotations = prev.Labels, prev.Annotations
		tmpl.Spec.NodeSelector = prev.Spec.NodeSelector
		tmpl.Spec.Tolerations = prev.Spec.Tolerations
		tmpl.Spec.SchedulingGates = prev.Spec.SchedulingGates
		if prev.Spec.Affinity == nil {
			if tmpl.Spec.Affinity != nil {
				tmpl.Spec.Affinity.NodeAffinity = nil
				if *tmpl.Spec.Affinity == (corev1.Affinity{}) {
					tmpl.Spec.Affinity = nil
				}
			}
		} else if tmpl.Spec.Affinity != nil {
			tmpl.Spec.Affinity.NodeAffinity = prev.Spec.Affinity.NodeAffinity
		}
	}
	return apimachineryvalidation.ValidateImmutableField(*tmpl, *prev, field.NewPath("spec", "template"))
}

func validateJobStatusUpdate(job, old *batchv1.Job) field.ErrorList {
	errs := validateMetaUpdate(&job.ObjectMeta, &old.ObjectMeta)
	s := &job.Status
	p := field.NewPath("status")
	for name, v := range map[string]int32{"active": s.Active, "succeeded": s.Succeeded, "failed": s.Failed} {
		errs = append(errs, validateNonnegative(int64(v), p.Child(name))...)
	}
	if s.Ready != nil {
		errs = append(errs, validateNonnegative(int64(*s.Ready), p.Child("ready"))...)
	}
	if s.Terminating != nil {
		errs = append(errs, validateNonnegative(int64(*s.Terminating), p.Child("terminating"))...)
	}
	if s.UncountedTerminatedPods != nil {
		up := p.Child("uncountedTerminatedPods")
		seen := sets.New[string]()
		for _, list := range []struct {
			name string
			uids []string
		}{{"succeeded", uidStrings(s.UncountedTerminatedPods.Succeeded)}, {"failed", uidStrings(s.UncountedTerminatedPods.Failed)}} {
			for i, uid := range list.uids {
				if uid == "" {
					errs = append(errs, field.Invalid(up.Child(list.name).Index(i), uid, "must not be empty"))
				} else if seen.Has(uid) {
					errs = append(errs, field.Duplicate(up.Child(list.name).Index(i), uid))
				}
				seen.Insert(uid)
			}
		}
	}
	if s.CompletionTime != nil && s.StartTime != nil && s.CompletionTime.Before(s.StartTime) {
		errs = append(errs, field.Invalid(p.Child("completionTime"), s.CompletionTime, "completionTime cannot be set before startTime"))
	}
	return errs
}

func validateCronJob(cj *batchv1.CronJob) field.ErrorList {
	errs := validateMeta(&cj.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	if len(cj.Name) > maxCronJobNameLength {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), cj.Name, fmt.Sprintf("must be no more than %d characters", maxCronJobNameLength)))
	}
	return append(errs, validateCronJobSpec(&cj.Spec, field.NewPath("spec"))...)
}

func validateCronJobUpdate(cj, old *batchv1.CronJob) field.ErrorList {
	errs := validateMetaUpdate(&cj.ObjectMeta, &old.ObjectMeta)
	return append(errs, validateCronJobSpec(&cj.Spec, field.NewPath("spec"))...)
}

func validateCronJobSpec(spec *batchv1.CronJobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	sp := fldPath.Child("schedule")
	if spec.Schedule == "" {
		errs = append(errs, field.Required(sp, ""))
	} else {
		if strings.Contains(spec.Schedule, "TZ") {
			errs = append(errs, field.Invalid(sp, spec.Schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
		} else if _, err := cron.ParseStandard(spec.Schedule); err != nil {
			errs = append(errs, field.Invalid(sp, spec.Schedule, err.Error()))
		}
	}
	if spec.TimeZone != nil {
		tp := fldPath.Child("timeZone")
		if *spec.TimeZone == "" || strings.EqualFold(*spec.TimeZone, "local") {
			errs = append(errs, field.Invalid(tp, *spec.TimeZone, "unknown time zone "+*spec.TimeZone))
		} else if _, err := time.LoadLocation(*spec.TimeZone); err != nil {
			errs = append(errs, field.Invalid(tp, *spec.TimeZone, err.Error()))
		}
	}
	if spec.StartingDeadlineSeconds != nil {
		errs = append(errs, validateNonnegative(*spec.StartingDeadlineSeconds, fldPath.Child("startingDeadlineSeconds"))...)
	}
	switch spec.ConcurrencyPolicy {
	case batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent:
	case "":
		errs = append(errs, field.Required(fldPath.Child("concurrencyPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("concurrencyPolicy"), spec.ConcurrencyPolicy,
			[]string{string(batchv1.AllowConcurrent), string(batchv1.ForbidConcurrent), string(batchv1.ReplaceConcurrent)}))
	}
	if spec.SuccessfulJobsHistoryLimit != nil {
		errs = append(errs, validateNonnegative(int64(*spec.SuccessfulJobsHistoryLimit), fldPath.Child("successfulJobsHistoryLimit"))...)
	}
	if spec.FailedJobsHistoryLimit != nil {
		errs = append(errs, validateNonnegative(int64(*spec.FailedJobsHistoryLimit), fldPath.Child("failedJobsHistoryLimit"))...)
	}
	tp := fldPath.Child("jobTemplate")
	errs = append(errs, metav1validation.ValidateLabels(spec.JobTemplate.Labels, tp.Child("metadata", "labels"))...)
	errs = append(errs, apimachineryvalidation.ValidateAnnotations(spec.JobTemplate.Annotations, tp.Child("metadata", "annotations"))...)
	errs = append(errs, validateJobSpec(&spec.JobTemplate.Spec, tp.Child("spec"), jobOptions{allowMissingSelector: true})...)
	return errs
}

func uidStrings[T ~string](uids []T) []string {
	out := make([]string, len(uids))
	for i, u := range uids {
		out[i] = string(u)
	}
	return out
}
