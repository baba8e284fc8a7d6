package filters

import (
	"context"
	"sync"
)

// AuditRecord collects what the filters and handlers after the audit filter learn about
// a request for its audit event: annotations (the authorizer's decision, admission
// plugins' findings) and the impersonated user. The audit filter puts one in the request
// context; without one, the functions that write to it do nothing.
type AuditRecord struct {
	mu           sync.Mutex
	annotations  map[string]string
	impersonated *User
}

type auditRecordKey struct{}

// WithAuditRecord returns a context carrying r.
func WithAuditRecord(ctx context.Context, r *AuditRecord) context.Context {
	return context.WithValue(ctx, auditRecordKey{}, r)
}

func auditRecordFrom(ctx context.Context) *AuditRecord {
	r, _ := ctx.Value(auditRecordKey{}).(*AuditRecord)
	return r
}

// AddAuditAnnotation records an annotation of the request's audit event, as upstream's
// audit.AddAuditAnnotation: the first value given for a key stays.
func AddAuditAnnotation(ctx context.Context, key, value string) {
	r := auditRecordFrom(ctx)
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.annotations[key]; ok {
		return
	}
	if r.annotations == nil {
		r.annotations = map[string]string{}
	}
	r.annotations[key] = value
}

// SetAuditImpersonatedUser records the user a request impersonates.
func SetAuditImpersonatedUser(ctx context.Context, u *User) {
	if r := auditRecordFrom(ctx); r != nil {
		r.mu.Lock()
		r.impersonated = u
		r.mu.Unlock()
	}
}

// Read returns a copy of the annotations so far (nil when there are none) and the
// impersonated user.
func (r *AuditRecord) Read() (map[string]string, *User) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var a map[string]string
	if len(r.annotations) > 0 {
		a = make(map[string]string, len(r.annotations))
		for k, v := range r.annotations {
			a[k] = v
		}
	}
	return a, r.impersonated
}
