package printers

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// apiServicePrinter prints APIServices as upstream's aggregator: NAME SERVICE
// AVAILABLE AGE, where SERVICE is namespace/name or Local, and AVAILABLE is the
// Available condition's status, with its reason when it is not True.
func apiServicePrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{nameColumn(),
			column("Service", "string", 0, "The reference to the service that hosts this API endpoint."),
			column("Available", "string", 0, "Whether this service is available."),
			ageColumn()},
		Row: rowFor(func(s *apiregistrationv1.APIService, now time.Time) []interface{} {
			return []interface{}{s.Name, apiServiceBackend(s), apiServiceAvailable(s), translateTimestampSince(s.CreationTimestamp, now)}
		}),
	}
}

func apiServiceBackend(s *apiregistrationv1.APIService) string {
	if s.Spec.Service == nil {
		return "Local"
	}
	return s.Spec.Service.Namespace + "/" + s.Spec.Service.Name
}

func apiServiceAvailable(s *apiregistrationv1.APIService) string {
	for _, c := range s.Status.Conditions {
		if c.Type != apiregistrationv1.Available {
			continue
		}
		if c.Status != apiregistrationv1.ConditionTrue && c.Reason != "" {
			return fmt.Sprintf("%s (%s)", c.Status, c.Reason)
		}
		return string(c.Status)
	}
	return string(apiregistrationv1.ConditionUnknown)
}
