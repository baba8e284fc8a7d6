package printers

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// leasePrinter prints leases: NAME HOLDER AGE.
func leasePrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Holder", "string", 0, coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]),
			ageColumn(),
		},
		Row: rowFor(func(l *coordinationv1.Lease, now time.Time) []interface{} {
			holder := ""
			if l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
			return []interface{}{l.Name, holder, translateTimestampSince(l.CreationTimestamp, now)}
		}),
	}
}
