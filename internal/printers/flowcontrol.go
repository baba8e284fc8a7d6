package printers

import (
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// flowSchemaPrinter prints FlowSchemas as upstream:
// NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL.
func flowSchemaPrinter() Printer {
	spec := flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("PriorityLevel", "string", 0, flowcontrolv1.PriorityLevelConfigurationReference{}.SwaggerDoc()["name"]),
			column("MatchingPrecedence", "string", 0, spec["matchingPrecedence"]),
			column("DistinguisherMethod", "string", 0, spec["distinguisherMethod"]),
			ageColumn(),
			column("MissingPL", "string", 0, "references a broken or non-existent PriorityLevelConfiguration"),
		},
		Row: rowFor(func(fs *flowcontrolv1.FlowSchema, now time.Time) []interface{} {
			method, missing := "<none>", "?"
			if fs.Spec.DistinguisherMethod != nil {
				method = string(fs.Spec.DistinguisherMethod.Type)
			}
			for _, c := range fs.Status.Conditions {
				if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
					missing = string(c.Status)
					break
				}
			}
			return []interface{}{fs.Name, fs.Spec.PriorityLevelConfiguration.Name, int64(fs.Spec.MatchingPrecedence), method,
				translateTimestampSince(fs.CreationTimestamp, now), missing}
		}),
	}
}

// priorityLevelPrinter prints PriorityLevelConfigurations as upstream:
// NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE QUEUELENGTHLIMIT AGE.
func priorityLevelPrinter() Printer {
	queuing := flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Type", "string", 0, flowcontrolv1.PriorityLevelConfigurationSpec{}.SwaggerDoc()["type"]),
			column("NominalConcurrencyShares", "string", 0, flowcontrolv1.LimitedPriorityLevelConfiguration{}.SwaggerDoc()["nominalConcurrencyShares"]),
			column("Queues", "string", 0, queuing["queues"]),
			column("HandSize", "string", 0, queuing["handSize"]),
			column("QueueLengthLimit", "string", 0, queuing["queueLengthLimit"]),
			ageColumn(),
		},
		Row: rowFor(func(pl *flowcontrolv1.PriorityLevelConfiguration, now time.Time) []interface{} {
			var shares, queues, hand, limit interface{} = "<none>", "<none>", "<none>", "<none>"
			if l := pl.Spec.Limited; l != nil {
				if l.NominalConcurrencyShares != nil {
					shares = int64(*l.NominalConcurrencyShares)
				}
				if q := l.LimitResponse.Queuing; q != nil {
					queues, hand, limit = int64(q.Queues), int64(q.HandSize), int64(q.QueueLengthLimit)
				}
			}
			return []interface{}{pl.Name, string(pl.Spec.Type), shares, queues, hand, limit, translateTimestampSince(pl.CreationTimestamp, now)}
		}),
	}
}
