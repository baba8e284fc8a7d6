package printers

import (
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// validatingAdmissionPolicyPrinter prints ValidatingAdmissionPolicies as upstream:
// NAME VALIDATIONS PARAMKIND AGE.
func validatingAdmissionPolicyPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Validations", "integer", 0, "Validations indicates the number of validation rules defined in this configuration"),
			column("ParamKind", "string", 0, "ParamKind specifies the kind of resources used to parameterize this policy"),
			ageColumn(),
		},
		Row: rowFor(func(p *admissionregistrationv1.ValidatingAdmissionPolicy, now time.Time) []interface{} {
			paramKind := "<unset>"
			if k := p.Spec.ParamKind; k != nil {
				paramKind = k.APIVersion + "/" + k.Kind
			}
			return []interface{}{p.Name, int64(len(p.Spec.Validations)), paramKind, translateTimestampSince(p.CreationTimestamp, now)}
		}),
	}
}

// validatingAdmissionPolicyBindingPrinter prints ValidatingAdmissionPolicyBindings as
// upstream: NAME POLICYNAME PARAMREF AGE, the parameter as namespace/name ("*/name"
// without a namespace) or its selector.
func validatingAdmissionPolicyBindingPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("PolicyName", "string", 0, "PolicyName indicates the policy definition which the policy binding binded to"),
			column("ParamRef", "string", 0, "ParamRef indicates the param resource which sets the configration param"),
			ageColumn(),
		},
		Row: rowFor(func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, now time.Time) []interface{} {
			param := "<unset>"
			if r := b.Spec.ParamRef; r != nil {
				switch {
				case r.Name != "" && r.Namespace != "":
					param = r.Namespace + "/" + r.Name
				case r.Name != "":
					param = "*/" + r.Name
				case r.Selector != nil:
					param = r.Selector.String()
				}
			}
			return []interface{}{b.Name, b.Spec.PolicyName, param, translateTimestampSince(b.CreationTimestamp, now)}
		}),
	}
}
