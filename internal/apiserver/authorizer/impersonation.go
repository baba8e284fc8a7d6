package authorizer

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubette/kubette/internal/apiserver/filters"
)

// serviceAccountPrefix starts the user name of a ServiceAccount: system:serviceaccount:NS:NAME.
const serviceAccountPrefix = "system:serviceaccount:"

// WithImpersonation serves requests with Impersonate-User (and -Group, -Uid,
// -Extra-KEY) headers as the user they name, once z allows the caller the impersonate
// verb on each: users (or serviceaccounts, for a ServiceAccount's user name), groups,
// uids and userextras/KEY, as upstream. It sits after authentication and before
// authorization, which then judges the impersonated user. A user other than
// system:anonymous gets system:authenticated unless the groups asked for say otherwise.
func WithImpersonation(next http.Handler, z Authorizer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		checks, err := impersonationChecks(req.Header)
		if err != nil {
			filters.WriteStatus(w, apierrors.NewInternalError(err))
			return
		}
		if len(checks) == 0 {
			next.ServeHTTP(w, req)
			return
		}
		caller, ok := filters.UserFrom(req.Context())
		if !ok {
			filters.WriteStatus(w, apierrors.NewInternalError(fmt.Errorf("no user found for request")))
			return
		}
		groupsGiven := len(req.Header.Values(authenticationv1.ImpersonateGroupHeader)) > 0
		as := &filters.User{Groups: []string{}}
		for _, c := range checks {
			a := c.attrs
			a.User, a.Verb, a.ResourceRequest = caller, "impersonate", true
			switch c.kind {
			case "ServiceAccount":
				as.Name = serviceAccountPrefix + a.Namespace + ":" + a.Name
				if !groupsGiven {
					as.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + a.Namespace}
				}
			case "User":
				as.Name = a.Name
			case "Group":
				as.Groups = append(as.Groups, a.Name)
			case "UserExtra":
				if as.Extra == nil {
					as.Extra = map[string][]string{}
				}
				as.Extra[a.Subresource] = append(as.Extra[a.Subresource], a.Name)
			case "UID":
				as.UID = a.Name
			}
			d, reason, err := z.Authorize(req.Context(), a)
			if d != Allow {
				if err != nil && reason == "" {
					reason = err.Error()
				}
				filters.WriteStatus(w, Forbidden(a, reason))
				return
			}
		}
		if as.Name != filters.Anonymous {
			if !hasAny(as.Groups, filters.AllAuthenticated, filters.AllUnauthenticated) {
				as.Groups = append(as.Groups, filters.AllAuthenticated)
			}
		} else if !hasAny(as.Groups, filters.AllUnauthenticated) {
			as.Groups = append(as.Groups, filters.AllUnauthenticated)
		}
		filters.SetAuditImpersonatedUser(req.Context(), as)
		req = req.Clone(filters.WithUser(req.Context(), as))
		for name := range req.Header {
			if strings.HasPrefix(name, "Impersonate-") {
				req.Header.Del(name)
			}
		}
		next.ServeHTTP(w, req)
	})
}

// impersonationCheck is one thing to impersonate and the attributes that authorize it.
type impersonationCheck struct {
	kind  string
	attrs Attributes
}

// impersonationChecks reads the impersonation headers: the user first, then groups,
// extras and the UID, which need a user.
func impersonationChecks(h http.Header) ([]impersonationCheck, error) {
	var checks []impersonationCheck
	user := h.Get(authenticationv1.ImpersonateUserHeader)
	if user != "" {
		if ns, name, ok := splitServiceAccount(user); ok {
			checks = append(checks, impersonationCheck{"ServiceAccount", Attributes{Resource: "serviceaccounts", Namespace: ns, Name: name}})
		} else {
			checks = append(checks, impersonationCheck{"User", Attributes{Resource: "users", Name: user}})
		}
	}
	var others []string
	for _, g := range h.Values(authenticationv1.ImpersonateGroupHeader) {
		checks = append(checks, impersonationCheck{"Group", Attributes{Resource: "groups", Name: g}})
		others = append(others, "group "+g)
	}
	for name, values := range h {
		if !strings.HasPrefix(name, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			continue
		}
		key := strings.ToLower(name[len(authenticationv1.ImpersonateUserExtraHeaderPrefix):])
		if k, err := url.PathUnescape(key); err == nil {
			key = k
		}
		for _, v := range values {
			checks = append(checks, impersonationCheck{"UserExtra", Attributes{APIGroup: "authentication.k8s.io", APIVersion: "v1", Resource: "userextras", Subresource: key, Name: v}})
			others = append(others, "extra "+key+"="+v)
		}
	}
	if uid := h.Get(authenticationv1.ImpersonateUIDHeader); uid != "" {
		checks = append(checks, impersonationCheck{"UID", Attributes{APIGroup: "authentication.k8s.io", APIVersion: "v1", Resource: "uids", Name: uid}})
		others = append(others, "uid "+uid)
	}
	if user == "" && len(others) > 0 {
		return nil, fmt.Errorf("requested %s without impersonating a user", strings.Join(others, ", "))
	}
	return checks, nil
}

// splitServiceAccount returns the namespace and name of a ServiceAccount's user name.
func splitServiceAccount(user string) (string, string, bool) {
	if !strings.HasPrefix(user, serviceAccountPrefix) {
		return "", "", false
	}
	ns, name, ok := strings.Cut(user[len(serviceAccountPrefix):], ":")
	if !ok || ns == "" || name == "" || strings.Contains(name, ":") {
		return "", "", false
	}
	return ns, name, true
}

func hasAny(groups []string, want ...string) bool {
	for _, g := range groups {
		for _, w := range want {
			if g == w {
				return true
			}
		}
	}
	return false
}
