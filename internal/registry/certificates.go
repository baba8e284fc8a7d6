package registry

import (
	"context"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/apiserver/filters"
	"github.com/kubette/kubette/internal/registry/validation"
)

var certificatesV1 = schema.GroupVersion{Group: "certificates.k8s.io", Version: "v1"}

// SubApproval is the certificatesigningrequests subresource through which a CSR is
// approved or denied (kubectl certificate approve|deny PUT it).
const SubApproval = "approval"

// certificatesResources are the kinds of certificates.k8s.io.
func certificatesResources() []*Resource {
	return []*Resource{{
		GroupVersion: certificatesV1, Kind: "CertificateSigningRequest", ListKind: "CertificateSigningRequestList",
		Plural: "certificatesigningrequests", Singular: "certificatesigningrequest", ShortNames: []string{"csr"},
		StoragePrefix: "/registry/certificatesigningrequests", Subresources: []string{"status", SubApproval},
		Strategy: csrStrategy(),
		New:      func() runtime.Object { return &certificatesv1.CertificateSigningRequest{} },
		NewList:  func() runtime.Object { return &certificatesv1.CertificateSigningRequestList{} },
		Fields: func(obj runtime.Object) fields.Set {
			c, _ := obj.(*certificatesv1.CertificateSigningRequest)
			if c == nil {
				c = &certificatesv1.CertificateSigningRequest{}
			}
			return fields.Set{"spec.signerName": c.Spec.SignerName}
		},
	}}
}

// csrStrategy is upstream's CSR strategy: the requester's identity is recorded on
// create, the spec never changes, the status subresource sets the certificate (and
// conditions other than Approved and Denied), and the approval subresource only
// changes the conditions.
func csrStrategy() Strategy {
	return Strategy{
		PrepareForCreate:        prepareCSRForCreate,
		PrepareForCreateContext: recordCSRRequester,
		PrepareForUpdate: func(obj, old runtime.Object) {
			n, ok1 := obj.(*certificatesv1.CertificateSigningRequest)
			o, ok2 := old.(*certificatesv1.CertificateSigningRequest)
			if ok1 && ok2 {
				n.Spec = *o.Spec.DeepCopy()
				n.Status = *o.Status.DeepCopy()
			}
		},
		Validate: func(obj runtime.Object) field.ErrorList {
			c, ok := obj.(*certificatesv1.CertificateSigningRequest)
			if !ok {
				return notCSR(obj)
			}
			return validation.ValidateCertificateSigningRequestCreate(c)
		},
		ValidateUpdate: csrValidator(validation.ValidateCertificateSigningRequestUpdate),
		Subresources: map[string]SubresourceStrategy{
			"status": {
				PrepareForUpdate: csrStatusUpdate, ValidateUpdate: csrValidator(validation.ValidateCertificateSigningRequestStatusUpdate),
				Verbs: []string{"get", "update", "patch"},
			},
			SubApproval: {
				PrepareForUpdate: csrApprovalUpdate, ValidateUpdate: csrValidator(validation.ValidateCertificateSigningRequestApprovalUpdate),
				Verbs: []string{"get", "update", "patch"},
			},
		},
	}
}

func notCSR(obj runtime.Object) field.ErrorList {
	return field.ErrorList{field.InternalError(nil, fmt.Errorf("%T is not a CertificateSigningRequest", obj))}
}

func csrValidator(fn func(obj, old *certificatesv1.CertificateSigningRequest) field.ErrorList) func(obj, old runtime.Object) field.ErrorList {
	return func(obj, old runtime.Object) field.ErrorList {
		n, ok1 := obj.(*certificatesv1.CertificateSigningRequest)
		o, ok2 := old.(*certificatesv1.CertificateSigningRequest)
		if !ok1 || !ok2 {
			return notCSR(obj)
		}
		return fn(n, o)
	}
}

// prepareCSRForCreate drops what the client may not set: the requester and the status
// (a CSR is never created approved).
func prepareCSRForCreate(obj runtime.Object) {
	c, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return
	}
	c.Spec.Username, c.Spec.UID, c.Spec.Groups, c.Spec.Extra = "", "", nil, nil
	c.Status = certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{}}
}

// recordCSRRequester fills the spec's requester from the authenticated user.
func recordCSRRequester(ctx context.Context, obj runtime.Object) {
	c, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return
	}
	u, ok := filters.UserFrom(ctx)
	if !ok || u == nil {
		return
	}
	c.Spec.Username, c.Spec.UID = u.Name, u.UID
	c.Spec.Groups = append([]string(nil), u.Groups...)
	if len(u.Extra) > 0 {
		c.Spec.Extra = make(map[string]certificatesv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			c.Spec.Extra[k] = append(certificatesv1.ExtraValue(nil), v...)
		}
	}
}

// csrStatusUpdate is what an update through certificatesigningrequests/status writes:
// the request's status and annotations over the current spec, with the Approved and
// Denied conditions kept as they are when the request has as many of them (else
// validation refuses the change).
func csrStatusUpdate(obj, old runtime.Object) runtime.Object {
	n, ok1 := obj.(*certificatesv1.CertificateSigningRequest)
	o, ok2 := old.(*certificatesv1.CertificateSigningRequest)
	if !ok1 || !ok2 {
		return obj
	}
	n.Spec = *o.Spec.DeepCopy()
	n.Labels, n.OwnerReferences = o.Labels, o.OwnerReferences
	keepConditions(n, o, certificatesv1.CertificateApproved)
	keepConditions(n, o, certificatesv1.CertificateDenied)
	stampConditions(n, o, time.Now())
	return n
}

// csrApprovalUpdate is what an update through certificatesigningrequests/approval
// writes: the current spec and certificate with the request's conditions and metadata.
func csrApprovalUpdate(obj, old runtime.Object) runtime.Object {
	n, ok1 := obj.(*certificatesv1.CertificateSigningRequest)
	o, ok2 := old.(*certificatesv1.CertificateSigningRequest)
	if !ok1 || !ok2 {
		return obj
	}
	stampConditions(n, o, time.Now())
	conditions := n.Status.Conditions
	n.Spec = *o.Spec.DeepCopy()
	n.Status = *o.Status.DeepCopy()
	n.Status.Conditions = conditions
	return n
}

// keepConditions puts old's conditions of type t back in place of n's when both have
// the same number of them.
func keepConditions(n, o *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) {
	var was, is []int
	for i, c := range o.Status.Conditions {
		if c.Type == t {
			was = append(was, i)
		}
	}
	for i, c := range n.Status.Conditions {
		if c.Type == t {
			is = append(is, i)
		}
	}
	if len(was) != len(is) {
		return
	}
	for k, i := range is {
		n.Status.Conditions[i] = o.Status.Conditions[was[k]]
	}
}

// stampConditions fills missing condition times: lastUpdateTime is now, and
// lastTransitionTime is that of the same type and status in o, else now.
func stampConditions(n, o *certificatesv1.CertificateSigningRequest, now time.Time) {
	t := metav1.NewTime(now.Truncate(time.Second))
	for i := range n.Status.Conditions {
		c := &n.Status.Conditions[i]
		if c.LastUpdateTime.IsZero() {
			c.LastUpdateTime = t
		}
		if !c.LastTransitionTime.IsZero() {
			continue
		}
		c.LastTransitionTime = t
		for _, oc := range o.Status.Conditions {
			if oc.Type == c.Type && oc.Status == c.Status && !oc.LastTransitionTime.IsZero() {
				c.LastTransitionTime = oc.LastTransitionTime
				break
			}
		}
	}
}
