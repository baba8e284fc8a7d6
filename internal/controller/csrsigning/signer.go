// Package csrsigning is the signer of the built-in signer names: an approved
// CertificateSigningRequest for kubernetes.io/kube-apiserver-client,
// kubernetes.io/kube-apiserver-client-kubelet or kubernetes.io/kubelet-serving gets a
// certificate from the cluster CA in status.certificate, as upstream's csrsigning
// controller (pkg/controller/certificates/signer). Each signer first checks the
// request as upstream does (usages, and for the kubelet signers the system:nodes
// subject and the names); a request that fails gets a Failed condition instead. The
// certificate lasts the CSR's expirationSeconds (at least ten minutes), at most the
// signing duration (a year by default). kubernetes.io/legacy-unknown and every other
// signer name are left alone.
package csrsigning

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/worker"
	"github.com/kubette/kubette/internal/pki"
	"github.com/kubette/kubette/internal/registry/validation"
)

// Name is the controller's name in the controller manager's registry (upstream's).
const Name = "csrsigning"

// DefaultDuration is the longest certificate issued when the manager names none
// (upstream's --cluster-signing-duration default).
const DefaultDuration = 365 * 24 * time.Hour

// minDuration is the shortest certificate issued, whatever the CSR asks for.
const minDuration = 10 * time.Minute

// FailureReason is the reason of the Failed condition of a request a signer refused.
const FailureReason = "SignerValidationFailure"

const syncTimeout = time.Minute

// Signer issues the certificates of approved CSRs of the built-in signers.
type Signer struct {
	client kubernetes.Interface
	ca     *pki.CA
	ttl    time.Duration
	lister certlisters.CertificateSigningRequestLister
	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	log    *slog.Logger
	now    func() time.Time
}

var _ controller.Runner = (*Signer)(nil)

// idle is the controller when the manager has no signing CA: it signs nothing.
type idle struct{ log *slog.Logger }

func (i idle) Run(ctx context.Context, _ int) {
	i.log.Info("no cluster signing CA: CertificateSigningRequests of the built-in signers are not signed")
	<-ctx.Done()
}

// New builds the signer from d.ClusterSigning; without one it returns a controller
// that does nothing, as upstream skips its signers without signing files.
func New(d controller.Deps) (controller.Runner, error) {
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("controller", Name)
	if d.ClusterSigning == nil {
		return idle{log}, nil
	}
	if d.Client == nil || d.Informers == nil {
		return nil, errors.New("csr signer: Client and Informers are required")
	}
	s := &Signer{
		client: d.Client, ca: d.ClusterSigning, ttl: d.ClusterSigningDuration,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "certificate"}),
		log: log, now: time.Now,
	}
	if s.ttl <= 0 {
		s.ttl = DefaultDuration
	}
	inf := d.Informers.Certificates().V1().CertificateSigningRequests()
	h, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.enqueue,
		UpdateFunc: func(_, obj any) { s.enqueue(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("csr signer: event handler: %w", err)
	}
	s.lister = inf.Lister()
	s.synced = []cache.InformerSynced{h.HasSynced}
	return s, nil
}

func (s *Signer) enqueue(obj any) {
	if c, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
		s.queue.Add(c.Name)
	}
}

// Run waits for the informer, then runs workers until ctx is done.
func (s *Signer) Run(ctx context.Context, workers int) {
	worker.Run(ctx, s.queue, worker.Options{Name: Name, Workers: workers, Synced: s.synced, Sync: s.Sync, Log: s.log, SyncTimeout: syncTimeout})
}

// HasCondition reports whether csr has a condition of type t with status True.
func HasCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// approved reports whether csr is approved and not denied.
func approved(csr *certificatesv1.CertificateSigningRequest) bool {
	a, d := false, false
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			a = true
		case certificatesv1.CertificateDenied:
			d = true
		}
	}
	return a && !d
}

// Sync issues the certificate of one CSR, or marks it Failed, when it is approved, for
// a built-in signer, and has neither a certificate nor a failure yet.
func (s *Signer) Sync(ctx context.Context, name string) error {
	csr, err := s.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get csr %s from the cache: %w", name, err)
	}
	if !approved(csr) || HasCondition(csr, certificatesv1.CertificateFailed) || len(csr.Status.Certificate) > 0 {
		return nil
	}
	check, ok := checks[csr.Spec.SignerName]
	if !ok {
		return nil
	}
	req, err := validation.ParseCSR(csr.Spec.Request)
	if err != nil {
		return fmt.Errorf("unable to parse csr %q: %w", name, err)
	}
	csr = csr.DeepCopy()
	if err := check(req, csr.Spec.Usages); err != nil {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: FailureReason,
			Message: err.Error(), LastUpdateTime: metav1.NewTime(s.now()),
		})
		if _, err := s.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("error adding failure condition for csr %s: %w", name, err)
		}
		return nil
	}
	ku, eku, err := KeyUsages(csr.Spec.Usages)
	if err != nil {
		return fmt.Errorf("csr %s: %w", name, err)
	}
	cert, err := s.ca.SignRequest(req, pki.RequestPolicy{KeyUsage: ku, ExtKeyUsage: eku, TTL: Duration(s.ttl, csr.Spec.ExpirationSeconds), Now: s.now()})
	if err != nil {
		return fmt.Errorf("error auto signing csr %s: %w", name, err)
	}
	csr.Status.Certificate = cert
	if _, err := s.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("error updating signature for csr %s: %w", name, err)
	}
	return nil
}

// Duration is how long a certificate lasts: the CSR's expirationSeconds, at least ten
// minutes and at most max; max when the CSR asks for nothing.
func Duration(max time.Duration, expirationSeconds *int32) time.Duration {
	if expirationSeconds == nil {
		return max
	}
	d := time.Duration(*expirationSeconds) * time.Second
	switch {
	case d > max:
		return max
	case d < minDuration:
		return minDuration
	}
	return d
}

// checks are the built-in signers' checks of a request.
var checks = map[string]func(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error{
	certificatesv1.KubeAPIServerClientSignerName:        checkAPIServerClient,
	certificatesv1.KubeAPIServerClientKubeletSignerName: CheckKubeletClient,
	certificatesv1.KubeletServingSignerName:             CheckKubeletServing,
}

// Signs reports whether the controller signs CSRs for signerName.
func Signs(signerName string) bool {
	_, ok := checks[signerName]
	return ok
}

func usageSet(usages []certificatesv1.KeyUsage) map[certificatesv1.KeyUsage]bool {
	m := make(map[certificatesv1.KeyUsage]bool, len(usages))
	for _, u := range usages {
		m[u] = true
	}
	return m
}

// sameUsages reports whether have is exactly one of the wanted sets.
func sameUsages(have map[certificatesv1.KeyUsage]bool, wants ...[]certificatesv1.KeyUsage) bool {
	for _, want := range wants {
		if len(have) != len(want) {
			continue
		}
		all := true
		for _, u := range want {
			all = all && have[u]
		}
		if all {
			return true
		}
	}
	return false
}

func usageList(us []certificatesv1.KeyUsage) string {
	s := make([]string, len(us))
	for i, u := range us {
		s[i] = string(u)
	}
	sort.Strings(s)
	return "[" + strings.Join(s, " ") + "]"
}

var (
	errNotSystemNodes = errors.New("subject organization is not system:nodes")
	errNotSystemNode  = errors.New("subject common name does not begin with system:node:")
)

// nodeSubject checks the subject of a kubelet certificate: O=system:nodes only and
// CN=system:node:NAME.
func nodeSubject(req *x509.CertificateRequest) error {
	if len(req.Subject.Organization) != 1 || req.Subject.Organization[0] != "system:nodes" {
		return errNotSystemNodes
	}
	return nil
}

// The usages a kubelet certificate must ask for, with or without key encipherment (RSA).
var (
	kubeletServingUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
	kubeletServingNoRSA  = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	kubeletClientUsages  = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
	kubeletClientNoRSA   = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
)

// CheckKubeletServing is the kubernetes.io/kubelet-serving signer's check: the node's
// subject, DNS or IP names only (at least one), server auth usages.
func CheckKubeletServing(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if err := nodeSubject(req); err != nil {
		return err
	}
	switch {
	case len(req.DNSNames) == 0 && len(req.IPAddresses) == 0:
		return errors.New("DNS or IP subjectAltName is required")
	case len(req.EmailAddresses) > 0:
		return errors.New("Email subjectAltNames are not allowed")
	case len(req.URIs) > 0:
		return errors.New("URI subjectAltNames are not allowed")
	case !sameUsages(usageSet(usages), kubeletServingUsages, kubeletServingNoRSA):
		return fmt.Errorf("usages did not match %s", usageList(kubeletServingUsages))
	case !strings.HasPrefix(req.Subject.CommonName, "system:node:"):
		return errNotSystemNode
	}
	return nil
}

// CheckKubeletClient is the kubernetes.io/kube-apiserver-client-kubelet signer's check:
// the node's subject, no names, client auth usages.
func CheckKubeletClient(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if err := nodeSubject(req); err != nil {
		return err
	}
	switch {
	case len(req.DNSNames) > 0:
		return errors.New("DNS subjectAltNames are not allowed")
	case len(req.EmailAddresses) > 0:
		return errors.New("Email subjectAltNames are not allowed")
	case len(req.IPAddresses) > 0:
		return errors.New("IP subjectAltNames are not allowed")
	case len(req.URIs) > 0:
		return errors.New("URI subjectAltNames are not allowed")
	case !strings.HasPrefix(req.Subject.CommonName, "system:node:"):
		return errNotSystemNode
	case !sameUsages(usageSet(usages), kubeletClientUsages, kubeletClientNoRSA):
		return fmt.Errorf("usages did not match %s", usageList(kubeletClientUsages))
	}
	return nil
}

// checkAPIServerClient is the kubernetes.io/kube-apiserver-client signer's check: client
// auth, with digital signature and key encipherment allowed, nothing else.
func checkAPIServerClient(_ *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	client := false
	for _, u := range usages {
		switch u {
		case certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment:
		case certificatesv1.UsageClientAuth:
			client = true
		default:
			return fmt.Errorf("invalid usage for client certificate: %s", u)
		}
	}
	if !client {
		return fmt.Errorf("missing required usage for client certificate: %s", certificatesv1.UsageClientAuth)
	}
	return nil
}

var keyUsages = map[certificatesv1.KeyUsage]x509.KeyUsage{
	certificatesv1.UsageSigning:           x509.KeyUsageDigitalSignature,
	certificatesv1.UsageDigitalSignature:  x509.KeyUsageDigitalSignature,
	certificatesv1.UsageContentCommitment: x509.KeyUsageContentCommitment,
	certificatesv1.UsageKeyEncipherment:   x509.KeyUsageKeyEncipherment,
	certificatesv1.UsageKeyAgreement:      x509.KeyUsageKeyAgreement,
	certificatesv1.UsageDataEncipherment:  x509.KeyUsageDataEncipherment,
	certificatesv1.UsageCertSign:          x509.KeyUsageCertSign,
	certificatesv1.UsageCRLSign:           x509.KeyUsageCRLSign,
	certificatesv1.UsageEncipherOnly:      x509.KeyUsageEncipherOnly,
	certificatesv1.UsageDecipherOnly:      x509.KeyUsageDecipherOnly,
}

var extKeyUsages = map[certificatesv1.KeyUsage]x509.ExtKeyUsage{
	certificatesv1.UsageAny:             x509.ExtKeyUsageAny,
	certificatesv1.UsageServerAuth:      x509.ExtKeyUsageServerAuth,
	certificatesv1.UsageClientAuth:      x509.ExtKeyUsageClientAuth,
	certificatesv1.UsageCodeSigning:     x509.ExtKeyUsageCodeSigning,
	certificatesv1.UsageEmailProtection: x509.ExtKeyUsageEmailProtection,
	certificatesv1.UsageSMIME:           x509.ExtKeyUsageEmailProtection,
	certificatesv1.UsageIPsecEndSystem:  x509.ExtKeyUsageIPSECEndSystem,
	certificatesv1.UsageIPsecTunnel:     x509.ExtKeyUsageIPSECTunnel,
	certificatesv1.UsageIPsecUser:       x509.ExtKeyUsageIPSECUser,
	certificatesv1.UsageTimestamping:    x509.ExtKeyUsageTimeStamping,
	certificatesv1.UsageOCSPSigning:     x509.ExtKeyUsageOCSPSigning,
	certificatesv1.UsageMicrosoftSGC:    x509.ExtKeyUsageMicrosoftServerGatedCrypto,
	certificatesv1.UsageNetscapeSGC:     x509.ExtKeyUsageNetscapeServerGatedCrypto,
}

// KeyUsages maps a CSR's usages to a certificate's key usages and extended key usages
// (in ascending order, each once).
func KeyUsages(usages []certificatesv1.KeyUsage) (x509.KeyUsage, []x509.ExtKeyUsage, error) {
	var ku x509.KeyUsage
	seen := map[x509.ExtKeyUsage]bool{}
	var unknown []string
	for _, u := range usages {
		if k, ok := keyUsages[u]; ok {
			ku |= k
		} else if e, ok := extKeyUsages[u]; ok {
			seen[e] = true
		} else {
			unknown = append(unknown, string(u))
		}
	}
	if len(unknown) > 0 {
		return 0, nil, fmt.Errorf("unrecognized usage values: %q", unknown)
	}
	var eku []x509.ExtKeyUsage
	for e := x509.ExtKeyUsageAny; e <= x509.ExtKeyUsageMicrosoftKernelCodeSigning; e++ {
		if seen[e] {
			eku = append(eku, e)
		}
	}
	return ku, eku, nil
}
