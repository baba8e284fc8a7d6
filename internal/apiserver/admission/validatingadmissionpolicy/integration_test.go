package validatingadmissionpolicy_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
}

func deploymentRules() *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
		}}}}
}

// warnings collects the Warning headers client-go receives.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// TestPolicyThroughTheAPI: a policy with a ConfigMap param, variables and a
// messageExpression denies a Deployment with too many replicas with upstream's message
// and code, admits a smaller one; a Warn binding gives a warning and admits; the
// defaults and the table columns are upstream's.
func TestPolicyThroughTheAPI(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "limits"},
		Data: map[string]string{"maxReplicas": "3"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pol, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "max-replicas"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind:        &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: deploymentRules(),
			Variables: []admissionregistrationv1.Variable{
				{Name: "max", Expression: "int(params.data.maxReplicas)"},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "object.spec.replicas <= variables.max",
				MessageExpression: "'replicas ' + string(object.spec.replicas) + ' exceed ' + string(variables.max)",
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fp := pol.Spec.FailurePolicy; fp == nil || *fp != admissionregistrationv1.Fail ||
		*pol.Spec.MatchConstraints.MatchPolicy != admissionregistrationv1.Equivalent ||
		pol.Spec.MatchConstraints.NamespaceSelector == nil || *pol.Spec.MatchConstraints.ResourceRules[0].Scope != "*" {
		t.Fatalf("defaults: %+v", pol.Spec)
	}
	deny := admissionregistrationv1.DenyAction
	if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "max-replicas-binding"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        "max-replicas",
			ParamRef:          &admissionregistrationv1.ParamRef{Name: "limits", ParameterNotFoundAction: &deny},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deployments := c.AppsV1().Deployments("default")
	want := `deployments.apps "big" is forbidden: ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding' denied request: replicas 5 exceed 3`
	// The plugin reads the watch cache, which may lag the creates by a moment.
	poll.Until(t, "the policy to deny a Deployment of 5 replicas", func() error {
		_, err := deployments.Create(ctx, deployment("big", 5), metav1.CreateOptions{})
		if err == nil {
			if err := deployments.Delete(ctx, "big", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			return fmt.Errorf("admitted")
		}
		if !apierrors.IsInvalid(err) || err.Error() != want {
			t.Fatalf("create: %v (%T), want a 422 %q", err, err, want)
		}
		return nil
	})
	if _, err := deployments.Create(ctx, deployment("small", 2), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a Deployment of 2 replicas: %v", err)
	}
	// Updates are checked too.
	d, err := deployments.Get(ctx, "small", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Replicas = ptr(int32(4))
	if _, err := deployments.Update(ctx, d, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.HasSuffix(err.Error(), "replicas 4 exceed 3") {
		t.Fatalf("update to 4 replicas: %v", err)
	}

	// A Warn binding of a policy without params: a warning, and the write succeeds.
	if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "labelled"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: deploymentRules(),
			Validations:      []admissionregistrationv1.Validation{{Expression: "has(object.metadata.labels.team)", Message: "a team label is required"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "labelled-warn"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "labelled",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = w
	wc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantWarning := "Validation failed for ValidatingAdmissionPolicy 'labelled' with binding 'labelled-warn': a team label is required"
	n := 0
	poll.Until(t, "a warning from the Warn binding", func() error {
		n++
		name := fmt.Sprintf("warned-%d", n)
		if _, err := wc.AppsV1().Deployments("default").Create(ctx, deployment(name, 1), metav1.CreateOptions{}); err != nil {
			t.Fatalf("a Warn binding refused: %v", err)
		}
		got := w.take()
		for _, g := range got {
			if g == wantWarning {
				return nil
			}
		}
		return fmt.Errorf("warnings %q", got)
	})

	// A validation error of the binding's configuration: a param that does not exist
	// with parameterNotFoundAction Deny.
	if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "missing-param"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "max-replicas",
			ParamRef:          &admissionregistrationv1.ParamRef{Name: "absent", ParameterNotFoundAction: &deny},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantMissing := "ValidatingAdmissionPolicy 'max-replicas' with binding 'missing-param' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
	poll.Until(t, "the missing param to deny", func() error {
		_, err := deployments.Create(ctx, deployment("tiny", 1), metav1.CreateOptions{})
		if err == nil {
			if err := deployments.Delete(ctx, "tiny", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			return fmt.Errorf("admitted")
		}
		if !strings.Contains(err.Error(), wantMissing) {
			t.Fatalf("create: %v, want %q", err, wantMissing)
		}
		return nil
	})
}

// TestInvalidPolicy: a policy whose expressions do not compile is refused with
// upstream's causes.
func TestInvalidPolicy(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	_, err := env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(context.Background(), &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: deploymentRules(),
			Validations: []admissionregistrationv1.Validation{
				{Expression: "object.spec.replicas >"},
				{Expression: "params.x", MessageExpression: "1"},
			},
		},
	}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("create: %v, want 422", err)
	}
	causes := map[string]string{}
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		causes[c.Field] = c.Message
	}
	for f, want := range map[string]string{
		"spec.validations[0].expression":        "compilation failed: ERROR: <input>:1:23: Syntax error",
		"spec.validations[1].expression":        "undeclared reference to 'params'",
		"spec.validations[1].messageExpression": "must evaluate to string but got int",
	} {
		if !strings.Contains(causes[f], want) {
			t.Errorf("cause %s: %q, want %q (all: %v)", f, causes[f], want, causes)
		}
	}
}

func ptr[T any](v T) *T { return &v }
