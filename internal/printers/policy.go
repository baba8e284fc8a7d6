package printers

import (
	"time"

	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// pdbPrinter prints PodDisruptionBudgets: NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED
// DISRUPTIONS AGE, as upstream 1.32 ("N/A" for the bound a budget does not set).
func pdbPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Min Available", "string", 0, "The minimum number of pods that must be available."),
			column("Max Unavailable", "string", 0, "The maximum number of pods that may be unavailable."),
			column("Allowed Disruptions", "integer", 0, "Calculated number of pods that may be disrupted at this time."),
			ageColumn(),
		},
		Row: rowFor(func(p *policyv1.PodDisruptionBudget, now time.Time) []interface{} {
			bound := func(v *intstr.IntOrString) string {
				if v == nil {
					return "N/A"
				}
				return v.String()
			}
			return []interface{}{p.Name, bound(p.Spec.MinAvailable), bound(p.Spec.MaxUnavailable),
				int64(p.Status.DisruptionsAllowed), translateTimestampSince(p.CreationTimestamp, now)}
		}),
	}
}

// runtimeClassPrinter prints RuntimeClasses: NAME HANDLER AGE, as upstream 1.32.
func runtimeClassPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			// Upstream describes the column with ObjectMeta's (absent) "handler" doc: empty.
			column("Handler", "string", 0, ""),
			ageColumn(),
		},
		Row: rowFor(func(rc *nodev1.RuntimeClass, now time.Time) []interface{} {
			return []interface{}{rc.Name, rc.Handler, translateTimestampSince(rc.CreationTimestamp, now)}
		}),
	}
}
