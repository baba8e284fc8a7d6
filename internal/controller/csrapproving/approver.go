// Package csrapproving approves kubelet client certificate requests, as upstream's
// csrapproving controller (pkg/controller/certificates/approver): a pending
// kubernetes.io/kube-apiserver-client-kubelet CSR that asks for what a kubelet's client
// certificate is (O=system:nodes, CN=system:node:NAME, client auth usages, no names)
// is approved when its requester may create certificatesigningrequests/selfnodeclient
// (a node renewing its own certificate: the requester is the CN) or
// certificatesigningrequests/nodeclient (a bootstrap token joining a node).
//
// The permission is asked of the API server with a SubjectAccessReview. While the API
// server serves none (no authorization.k8s.io), the approver falls back to the rights
// upstream's default bindings give: selfnodeclient to the system:nodes group,
// nodeclient to system:bootstrappers, both to system:masters.
package csrapproving

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/csrsigning"
	"github.com/kubette/kubette/internal/controller/worker"
	"github.com/kubette/kubette/internal/registry/validation"
)

// Name is the controller's name in the controller manager's registry (upstream's).
const Name = "csrapproving"

// Reason is the reason of the Approved condition the approver adds.
const Reason = "AutoApproved"

const syncTimeout = time.Minute

// recognizer is one kind of request the approver approves, and the right it needs.
type recognizer struct {
	subresource string
	recognize   func(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) bool
	message     string
	// groups may, without a SubjectAccessReview API, do it.
	groups []string
}

func isNodeClient(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) bool {
	return csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName &&
		csrsigning.CheckKubeletClient(req, csr.Spec.Usages) == nil
}

var recognizers = []recognizer{
	{
		subresource: "selfnodeclient",
		recognize: func(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) bool {
			return csr.Spec.Username == req.Subject.CommonName && isNodeClient(csr, req)
		},
		message: "Auto approving self kubelet client certificate after SubjectAccessReview.",
		groups:  []string{"system:nodes", "system:masters"},
	},
	{
		subresource: "nodeclient",
		recognize:   isNodeClient,
		message:     "Auto approving kubelet client certificate after SubjectAccessReview.",
		groups:      []string{"system:bootstrappers", "system:masters"},
	},
}

// errNotAllowed is a recognized request whose requester lacks the right: retried with
// back-off (the right may come), without a log line each time.
var errNotAllowed = errors.New("subject access review was not approved")

// Approver approves kubelet client CSRs.
type Approver struct {
	client kubernetes.Interface
	lister certlisters.CertificateSigningRequestLister
	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	log    *slog.Logger
}

var _ controller.Runner = (*Approver)(nil)

// New builds the approver and registers its CSR informer.
func New(d controller.Deps) (*Approver, error) {
	if d.Client == nil || d.Informers == nil {
		return nil, errors.New("csr approver: Client and Informers are required")
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	a := &Approver{
		client: d.Client,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "csrapproving"}),
		log: log.With("controller", Name),
	}
	inf := d.Informers.Certificates().V1().CertificateSigningRequests()
	enqueue := func(obj any) {
		if c, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
			a.queue.Add(c.Name)
		}
	}
	h, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("csr approver: event handler: %w", err)
	}
	a.lister = inf.Lister()
	a.synced = []cache.InformerSynced{h.HasSynced}
	return a, nil
}

// Run waits for the informer, then runs workers until ctx is done.
func (a *Approver) Run(ctx context.Context, workers int) {
	worker.Run(ctx, a.queue, worker.Options{
		Name: Name, Workers: workers, Synced: a.synced, Sync: a.Sync, Log: a.log, SyncTimeout: syncTimeout,
		OnError: func(key string, err error) bool {
			if errors.Is(err, errNotAllowed) {
				a.log.Debug("not approving", "csr", key, "err", err)
				a.queue.AddRateLimited(key)
				return true
			}
			return false
		},
	})
}

// Sync approves one CSR when it is pending, recognized and its requester has the right.
func (a *Approver) Sync(ctx context.Context, name string) error {
	csr, err := a.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get csr %s from the cache: %w", name, err)
	}
	if len(csr.Status.Certificate) != 0 || csrsigning.HasCondition(csr, certificatesv1.CertificateApproved) ||
		csrsigning.HasCondition(csr, certificatesv1.CertificateDenied) {
		return nil
	}
	req, err := validation.ParseCSR(csr.Spec.Request)
	if err != nil {
		return fmt.Errorf("unable to parse csr %q: %w", name, err)
	}
	var tried []string
	for _, r := range recognizers {
		if !r.recognize(csr, req) {
			continue
		}
		tried = append(tried, r.subresource)
		ok, err := a.allowed(ctx, csr, r)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		csr = csr.DeepCopy()
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: Reason, Message: r.message,
		})
		if _, err := a.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("error updating approval for csr %s: %w", name, err)
		}
		return nil
	}
	if len(tried) > 0 {
		return fmt.Errorf("recognized csr %q as %v but %w", name, tried, errNotAllowed)
	}
	return nil
}

// allowed asks whether the CSR's requester may create certificatesigningrequests/SUB.
func (a *Approver) allowed(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, r recognizer) (bool, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(csr.Spec.Extra))
	for k, v := range csr.Spec.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: csr.Spec.Username, UID: csr.Spec.UID, Groups: csr.Spec.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Group: "certificates.k8s.io", Version: "*", Resource: "certificatesigningrequests", Subresource: r.subresource, Verb: "create",
		},
	}}
	got, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	switch {
	case err == nil:
		return got.Status.Allowed, nil
	case apierrors.IsNotFound(err):
		// No SubjectAccessReview API: upstream's default bindings.
		for _, g := range csr.Spec.Groups {
			if slices.Contains(r.groups, g) {
				return true, nil
			}
		}
		return false, nil
	}
	return false, fmt.Errorf("subject access review for csr %s: %w", csr.Name, err)
}
