package printers

import (
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// validatingWebhookConfigurationPrinter prints ValidatingWebhookConfigurations as
// upstream: NAME WEBHOOKS AGE.
func validatingWebhookConfigurationPrinter() Printer {
	return Printer{
		Columns: webhookConfigurationColumns(admissionregistrationv1.ValidatingWebhookConfiguration{}.SwaggerDoc()["webhooks"]),
		Row: rowFor(func(c *admissionregistrationv1.ValidatingWebhookConfiguration, now time.Time) []interface{} {
			return []interface{}{c.Name, int64(len(c.Webhooks)), translateTimestampSince(c.CreationTimestamp, now)}
		}),
	}
}

// mutatingWebhookConfigurationPrinter prints MutatingWebhookConfigurations as
// upstream: NAME WEBHOOKS AGE.
func mutatingWebhookConfigurationPrinter() Printer {
	return Printer{
		Columns: webhookConfigurationColumns(admissionregistrationv1.MutatingWebhookConfiguration{}.SwaggerDoc()["webhooks"]),
		Row: rowFor(func(c *admissionregistrationv1.MutatingWebhookConfiguration, now time.Time) []interface{} {
			return []interface{}{c.Name, int64(len(c.Webhooks)), translateTimestampSince(c.CreationTimestamp, now)}
		}),
	}
}

func webhookConfigurationColumns(webhooksDoc string) []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{nameColumn(), column("Webhooks", "integer", 0, webhooksDoc), ageColumn()}
}
