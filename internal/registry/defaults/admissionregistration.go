package defaults

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ValidatingWebhookConfiguration sets upstream's v1 defaults on each webhook.
func ValidatingWebhookConfiguration(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		webhookCommon(&w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds, w.Rules, &w.ClientConfig)
	}
}

// MutatingWebhookConfiguration sets upstream's v1 defaults on each webhook, and
// reinvocationPolicy Never.
func MutatingWebhookConfiguration(c *admissionregistrationv1.MutatingWebhookConfiguration) {
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		webhookCommon(&w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds, w.Rules, &w.ClientConfig)
		if w.ReinvocationPolicy == nil {
			p := admissionregistrationv1.NeverReinvocationPolicy
			w.ReinvocationPolicy = &p
		}
	}
}

// webhookCommon holds the defaults both kinds of webhook share: failurePolicy Fail,
// matchPolicy Equivalent, empty (everything) selectors, a 10 s timeout, rules of any
// scope, and port 443 for a Service.
func webhookCommon(fp **admissionregistrationv1.FailurePolicyType, mp **admissionregistrationv1.MatchPolicyType,
	ns, obj **metav1.LabelSelector, timeout **int32, rules []admissionregistrationv1.RuleWithOperations,
	cc *admissionregistrationv1.WebhookClientConfig) {
	if *fp == nil {
		p := admissionregistrationv1.Fail
		*fp = &p
	}
	if *mp == nil {
		p := admissionregistrationv1.Equivalent
		*mp = &p
	}
	if *ns == nil {
		*ns = &metav1.LabelSelector{}
	}
	if *obj == nil {
		*obj = &metav1.LabelSelector{}
	}
	if *timeout == nil {
		*timeout = int32Ptr(10)
	}
	for i := range rules {
		AdmissionRule(&rules[i].Rule)
	}
	if cc.Service != nil && cc.Service.Port == nil {
		cc.Service.Port = int32Ptr(443)
	}
}

// AdmissionRule sets a rule's default scope, "*".
func AdmissionRule(r *admissionregistrationv1.Rule) {
	if r.Scope == nil {
		s := admissionregistrationv1.AllScopes
		r.Scope = &s
	}
}
