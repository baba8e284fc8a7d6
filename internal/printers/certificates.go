package printers

import (
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// csrPrinter prints CertificateSigningRequests as upstream:
// NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION.
func csrPrinter() Printer {
	spec := certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			ageColumn(),
			column("SignerName", "string", 0, spec["signerName"]),
			column("Requestor", "string", 0, spec["request"]),
			column("RequestedDuration", "string", 0, spec["expirationSeconds"]),
			column("Condition", "string", 0, certificatesv1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"]),
		},
		Row: rowFor(func(c *certificatesv1.CertificateSigningRequest, now time.Time) []interface{} {
			signer, requested := "<none>", "<none>"
			if c.Spec.SignerName != "" {
				signer = c.Spec.SignerName
			}
			if c.Spec.ExpirationSeconds != nil {
				requested = duration.HumanDuration(time.Duration(*c.Spec.ExpirationSeconds) * time.Second)
			}
			return []interface{}{c.Name, translateTimestampSince(c.CreationTimestamp, now), signer, c.Spec.Username, requested, csrCondition(c)}
		}),
	}
}

// csrCondition summarises a CSR's state: Denied, Approved or Pending, then Failed and
// Issued when they hold.
func csrCondition(c *certificatesv1.CertificateSigningRequest) string {
	var approved, denied, failed bool
	for _, cond := range c.Status.Conditions {
		switch cond.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		case certificatesv1.CertificateFailed:
			failed = true
		}
	}
	s := "Pending"
	switch {
	case denied:
		s = "Denied"
	case approved:
		s = "Approved"
	}
	if failed {
		s += ",Failed"
	}
	if len(c.Status.Certificate) > 0 {
		s += ",Issued"
	}
	return s
}
