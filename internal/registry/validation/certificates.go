package validation

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sort"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// LegacyUnknownSignerName is the signer of CSRs made through certificates.k8s.io/v1beta1
// without one; certificates.k8s.io/v1 refuses it on new requests and no built-in signer
// ever signs it.
const LegacyUnknownSignerName = "kubernetes.io/legacy-unknown"

// csrOptions relax the rules for objects that already break them (stored data from older
// servers), as upstream's certificateValidationOptions.
type csrOptions struct {
	approvalConditions  bool // the update may add Approved or Denied (the approval subresource)
	setCertificate      bool // the update may set status.certificate (the status subresource)
	approvedAndDenied   bool
	legacySigner        bool
	duplicateConditions bool
	emptyConditionType  bool
	anyCertificate      bool
	unknownUsages       bool
	duplicateUsages     bool
}

// csrUsages is every key usage a CSR may ask for, sorted.
var csrUsages = func() []string {
	all := []certificatesv1.KeyUsage{
		certificatesv1.UsageSigning, certificatesv1.UsageDigitalSignature, certificatesv1.UsageContentCommitment,
		certificatesv1.UsageKeyEncipherment, certificatesv1.UsageKeyAgreement, certificatesv1.UsageDataEncipherment,
		certificatesv1.UsageCertSign, certificatesv1.UsageCRLSign, certificatesv1.UsageEncipherOnly,
		certificatesv1.UsageDecipherOnly, certificatesv1.UsageAny, certificatesv1.UsageServerAuth,
		certificatesv1.UsageClientAuth, certificatesv1.UsageCodeSigning, certificatesv1.UsageEmailProtection,
		certificatesv1.UsageSMIME, certificatesv1.UsageIPsecEndSystem, certificatesv1.UsageIPsecTunnel,
		certificatesv1.UsageIPsecUser, certificatesv1.UsageTimestamping, certificatesv1.UsageOCSPSigning,
		certificatesv1.UsageMicrosoftSGC, certificatesv1.UsageNetscapeSGC,
	}
	out := make([]string, len(all))
	for i, u := range all {
		out[i] = string(u)
	}
	sort.Strings(out)
	return out
}()

func knownUsage(u certificatesv1.KeyUsage) bool {
	i := sort.SearchStrings(csrUsages, string(u))
	return i < len(csrUsages) && csrUsages[i] == string(u)
}

// ParseCSR decodes the PEM CERTIFICATE REQUEST of a CSR's spec.request.
func ParseCSR(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate request: %w", err)
	}
	return req, nil
}

// checkCSRRequest reports why spec.request is not a correctly signed certificate request.
func checkCSRRequest(pemBytes []byte) error {
	req, err := ParseCSR(pemBytes)
	if err != nil {
		return err
	}
	return req.CheckSignature()
}

// checkIssuedCertificate reports why status.certificate is not one or more PEM
// CERTIFICATE blocks without headers (empty is fine).
func checkIssuedCertificate(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	blocks := 0
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("only CERTIFICATE PEM blocks are allowed, found %q", block.Type)
		}
		if len(block.Headers) != 0 {
			return errors.New("no PEM block headers are permitted")
		}
		certs, err := x509.ParseCertificates(block.Bytes)
		if err != nil {
			return err
		}
		if len(certs) == 0 {
			return errors.New("found CERTIFICATE PEM block containing 0 certificates")
		}
		blocks++
		data = rest
	}
	if blocks == 0 {
		return errors.New("must contain at least one CERTIFICATE PEM block")
	}
	return nil
}

// ValidateSignerName checks a signer name has the form example.com/signer-name, as
// upstream's rules for CSRs and ClusterTrustBundles.
func ValidateSignerName(fldPath *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	parts := strings.Split(name, "/")
	if len(parts) != 2 {
		return field.ErrorList{field.Invalid(fldPath, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	domain, path := parts[0], parts[1]
	if len(domain) > validation.DNS1123SubdomainMaxLength {
		errs = append(errs, field.TooLong(fldPath, "", validation.DNS1123SubdomainMaxLength))
	}
	labels := strings.Split(domain, ".")
	for _, l := range labels {
		if msgs := validation.IsDNS1123Label(l); len(msgs) > 0 {
			for _, m := range msgs {
				errs = append(errs, field.Invalid(fldPath, domain, fmt.Sprintf("validating label %q: %s", l, m)))
			}
			break
		}
	}
	if len(labels) < 2 {
		errs = append(errs, field.Invalid(fldPath, domain, "should be a domain with at least two segments separated by dots"))
	}
	for _, l := range strings.Split(path, ".") {
		if msgs := validation.IsDNS1123Subdomain(l); len(msgs) > 0 {
			for _, m := range msgs {
				errs = append(errs, field.Invalid(fldPath, path, fmt.Sprintf("validating label %q: %s", l, m)))
			}
			break
		}
	}
	if max := 2*validation.DNS1123SubdomainMaxLength + validation.DNS1123LabelMaxLength + 2; len(name) > max {
		errs = append(errs, field.TooLong(fldPath, "", max))
	}
	return errs
}

// csrOptionsFor tolerates in an update what old already has.
func csrOptionsFor(obj, old *certificatesv1.CertificateSigningRequest) csrOptions {
	var o csrOptions
	if old == nil {
		return o
	}
	approved, denied := false, false
	seen := map[certificatesv1.RequestConditionType]bool{}
	for _, c := range old.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		case "":
			o.emptyConditionType = true
		}
		if seen[c.Type] {
			o.duplicateConditions = true
		}
		seen[c.Type] = true
	}
	o.approvedAndDenied = approved && denied
	o.legacySigner = old.Spec.SignerName == LegacyUnknownSignerName
	o.anyCertificate = bytes.Equal(obj.Status.Certificate, old.Status.Certificate) || checkIssuedCertificate(old.Status.Certificate) != nil
	usages := map[certificatesv1.KeyUsage]bool{}
	for _, u := range old.Spec.Usages {
		if !knownUsage(u) {
			o.unknownUsages = true
		}
		if usages[u] {
			o.duplicateUsages = true
		}
		usages[u] = true
	}
	return o
}

// ValidateCertificateSigningRequestCreate returns the field errors of a new CSR.
func ValidateCertificateSigningRequestCreate(csr *certificatesv1.CertificateSigningRequest) field.ErrorList {
	return validateCSR(csr, csrOptionsFor(csr, nil))
}

// ValidateCertificateSigningRequestUpdate returns the field errors of an update of the
// main resource, which may change neither the approval nor the certificate.
func ValidateCertificateSigningRequestUpdate(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	return validateCSRUpdate(csr, old, csrOptionsFor(csr, old))
}

// ValidateCertificateSigningRequestStatusUpdate returns the field errors of an update
// through the status subresource, which may set the certificate.
func ValidateCertificateSigningRequestStatusUpdate(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	o := csrOptionsFor(csr, old)
	o.setCertificate = true
	return validateCSRUpdate(csr, old, o)
}

// ValidateCertificateSigningRequestApprovalUpdate returns the field errors of an update
// through the approval subresource, which may add Approved or Denied.
func ValidateCertificateSigningRequestApprovalUpdate(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	o := csrOptionsFor(csr, old)
	o.approvalConditions = true
	return validateCSRUpdate(csr, old, o)
}

func validateCSR(csr *certificatesv1.CertificateSigningRequest, o csrOptions) field.ErrorList {
	// Any name is allowed, as upstream's ValidateCertificateRequestName.
	errs := validateMeta(&csr.ObjectMeta, false, func(string, bool) []string { return nil })
	spec := field.NewPath("spec")
	if err := checkCSRRequest(csr.Spec.Request); err != nil {
		errs = append(errs, field.Invalid(spec.Child("request"), csr.Spec.Request, err.Error()))
	}
	if len(csr.Spec.Usages) == 0 {
		errs = append(errs, field.Required(spec.Child("usages"), ""))
	}
	seen := map[certificatesv1.KeyUsage]bool{}
	for i, u := range csr.Spec.Usages {
		if !o.unknownUsages && !knownUsage(u) {
			errs = append(errs, field.NotSupported(spec.Child("usages").Index(i), u, csrUsages))
		}
		if !o.duplicateUsages && seen[u] {
			errs = append(errs, field.Duplicate(spec.Child("usages").Index(i), u))
		}
		seen[u] = true
	}
	if csr.Spec.SignerName == LegacyUnknownSignerName && !o.legacySigner {
		errs = append(errs, field.Invalid(spec.Child("signerName"), csr.Spec.SignerName, "the legacy signerName is not allowed via this API version"))
	} else {
		errs = append(errs, ValidateSignerName(spec.Child("signerName"), csr.Spec.SignerName)...)
	}
	if e := csr.Spec.ExpirationSeconds; e != nil && *e < 600 {
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *e, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	errs = append(errs, validateCSRConditions(field.NewPath("status", "conditions"), csr, o)...)
	if !o.anyCertificate {
		if err := checkIssuedCertificate(csr.Status.Certificate); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("status", "certificate"), "<certificate data>", err.Error()))
		}
	}
	return errs
}

// onlyTrue are the condition types whose status may only be True.
func onlyTrue(t certificatesv1.RequestConditionType) bool {
	return t == certificatesv1.CertificateApproved || t == certificatesv1.CertificateDenied || t == certificatesv1.CertificateFailed
}

func validateCSRConditions(fldPath *field.Path, csr *certificatesv1.CertificateSigningRequest, o csrOptions) field.ErrorList {
	var errs field.ErrorList
	seen := map[certificatesv1.RequestConditionType]bool{}
	approved, denied := false, false
	for i, c := range csr.Status.Conditions {
		p := fldPath.Index(i)
		if !o.emptyConditionType && c.Type == "" {
			errs = append(errs, field.Required(p.Child("type"), ""))
		}
		allowed := []string{string(corev1.ConditionFalse), string(corev1.ConditionTrue), string(corev1.ConditionUnknown)}
		if onlyTrue(c.Type) {
			allowed = []string{string(corev1.ConditionTrue)}
		}
		switch {
		case c.Status == "":
			errs = append(errs, field.Required(p.Child("status"), ""))
		case !contains(allowed, string(c.Status)):
			errs = append(errs, field.NotSupported(p.Child("status"), c.Status, allowed))
		}
		if !o.approvedAndDenied {
			switch c.Type {
			case certificatesv1.CertificateApproved:
				approved = true
				if denied {
					errs = append(errs, field.Invalid(p.Child("type"), c.Type, "Approved and Denied conditions are mutually exclusive"))
				}
			case certificatesv1.CertificateDenied:
				denied = true
				if approved {
					errs = append(errs, field.Invalid(p.Child("type"), c.Type, "Approved and Denied conditions are mutually exclusive"))
				}
			}
		}
		if !o.duplicateConditions && seen[c.Type] {
			errs = append(errs, field.Duplicate(p.Child("type"), c.Type))
		}
		seen[c.Type] = true
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func conditionsOf(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) []certificatesv1.CertificateSigningRequestCondition {
	var out []certificatesv1.CertificateSigningRequestCondition
	for _, c := range csr.Status.Conditions {
		if c.Type == t {
			out = append(out, c)
		}
	}
	return out
}

func validateCSRUpdate(csr, old *certificatesv1.CertificateSigningRequest, o csrOptions) field.ErrorList {
	errs := validateCSR(csr, o)
	conditions := field.NewPath("status", "conditions")
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		if len(conditionsOf(csr, t)) < len(conditionsOf(old, t)) {
			errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not remove a condition of type %q", t)))
		}
	}
	if !o.approvalConditions {
		for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied} {
			was, is := conditionsOf(old, t), conditionsOf(csr, t)
			switch {
			case len(is) < len(was):
				// reported above
			case len(is) > len(was):
				errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not add a condition of type %q", t)))
			case !equality.Semantic.DeepEqual(was, is):
				errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not modify a condition of type %q", t)))
			}
		}
	}
	if !bytes.Equal(csr.Status.Certificate, old.Status.Certificate) {
		switch {
		case !o.setCertificate:
			errs = append(errs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not set certificate content"))
		case len(old.Status.Certificate) > 0:
			errs = append(errs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not modify existing certificate content"))
		}
	}
	return append(errs, validateMetaUpdate(&csr.ObjectMeta, &old.ObjectMeta)...)
}
