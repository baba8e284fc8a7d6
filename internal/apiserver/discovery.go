package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/registry"
)

var allVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

func verbsOf(r *registry.Resource) metav1.Verbs {
	if len(r.Verbs) > 0 {
		return r.Verbs
	}
	return allVerbs
}

// subresourceInfo describes a subresource in discovery.
type subresourceInfo struct {
	gvk   schema.GroupVersionKind
	verbs metav1.Verbs
}

func subresourceOf(r *registry.Resource, sub string) subresourceInfo {
	own := r.GroupVersionKind()
	if st, ok := r.Strategy.Subresources[sub]; ok && len(st.Verbs) > 0 {
		// A subresource with update rules of its own says what it serves.
		verbs := append(metav1.Verbs(nil), st.Verbs...)
		sort.Strings(verbs)
		return subresourceInfo{own, verbs}
	}
	switch sub {
	case "status", "ephemeralcontainers":
		return subresourceInfo{own, metav1.Verbs{"get", "patch", "update"}}
	case "scale":
		return subresourceInfo{schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, metav1.Verbs{"get", "patch", "update"}}
	case "binding":
		return subresourceInfo{schema.GroupVersionKind{Version: "v1", Kind: "Binding"}, metav1.Verbs{"create"}}
	case "log":
		return subresourceInfo{own, metav1.Verbs{"get"}}
	case subresourceExec, subresourceAttach, subresourcePortForward:
		kind := map[string]string{subresourceExec: "PodExecOptions", subresourceAttach: "PodAttachOptions", subresourcePortForward: "PodPortForwardOptions"}[sub]
		return subresourceInfo{schema.GroupVersionKind{Version: "v1", Kind: kind}, metav1.Verbs{"create", "get"}}
	case subresourceProxy:
		// PodProxyOptions, ServiceProxyOptions, NodeProxyOptions; OPTIONS and HEAD have no verb of their own.
		return subresourceInfo{schema.GroupVersionKind{Version: "v1", Kind: r.Kind + "ProxyOptions"}, metav1.Verbs{"create", "delete", "get", "patch", "update"}}
	case "finalize":
		return subresourceInfo{own, metav1.Verbs{"update"}}
	case "eviction":
		return subresourceInfo{schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"}, metav1.Verbs{"create"}}
	case "token":
		return subresourceInfo{schema.GroupVersionKind{Group: "authentication.k8s.io", Version: "v1", Kind: "TokenRequest"}, metav1.Verbs{"create"}}
	}
	return subresourceInfo{own, metav1.Verbs{"get"}}
}

// resourceList builds the APIResourceList of one group-version.
func (s *Server) resourceList(gv schema.GroupVersion) *metav1.APIResourceList {
	list := &metav1.APIResourceList{GroupVersion: gv.String(), APIResources: []metav1.APIResource{}}
	list.APIVersion, list.Kind = "v1", "APIResourceList"
	for _, r := range s.table.All() {
		if r.GroupVersion != gv {
			continue
		}
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: r.Plural, SingularName: r.Singular, Namespaced: r.Namespaced, Kind: r.Kind,
			Verbs: verbsOf(r), ShortNames: r.ShortNames, Categories: r.Categories,
		})
		for _, sub := range r.Subresources {
			info := subresourceOf(r, sub)
			ar := metav1.APIResource{Name: r.Plural + "/" + sub, Namespaced: r.Namespaced, Kind: info.gvk.Kind, Verbs: info.verbs}
			if info.gvk.GroupVersion() != gv {
				ar.Group, ar.Version = info.gvk.Group, info.gvk.Version
			}
			list.APIResources = append(list.APIResources, ar)
		}
	}
	return list
}

// groupDiscovery builds the aggregated discovery entry of one group.
func (s *Server) groupDiscovery(group string) apidiscoveryv2.APIGroupDiscovery {
	g := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: group}}
	for _, gv := range s.table.GroupVersions() {
		if gv.Group != group {
			continue
		}
		v := apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
		for _, r := range s.table.All() {
			if r.GroupVersion != gv {
				continue
			}
			scope := apidiscoveryv2.ScopeCluster
			if r.Namespaced {
				scope = apidiscoveryv2.ScopeNamespace
			}
			rd := apidiscoveryv2.APIResourceDiscovery{
				Resource: r.Plural, SingularResource: r.Singular, Scope: scope, Verbs: verbsOf(r),
				ResponseKind: &metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: r.Kind},
				ShortNames:   r.ShortNames, Categories: r.Categories,
			}
			for _, sub := range r.Subresources {
				info := subresourceOf(r, sub)
				rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
					Subresource:  sub,
					ResponseKind: &metav1.GroupVersionKind{Group: info.gvk.Group, Version: info.gvk.Version, Kind: info.gvk.Kind},
					Verbs:        info.verbs,
				})
			}
			v.Resources = append(v.Resources, rd)
		}
		g.Versions = append(g.Versions, v)
	}
	return g
}

// wantsAggregated reports whether the client accepts aggregated discovery v2.
func wantsAggregated(req *http.Request) bool {
	for _, part := range strings.Split(req.Header.Get("Accept"), ",") {
		if strings.Contains(part, "as=APIGroupDiscoveryList") && strings.Contains(part, "g=apidiscovery.k8s.io") && strings.Contains(part, "v=v2") && !strings.Contains(part, "v=v2beta1") {
			return strings.HasPrefix(strings.TrimSpace(part), mimeJSON)
		}
	}
	return false
}

func (s *Server) writeDiscovery(w http.ResponseWriter, obj interface{}, aggregated bool) {
	w.Header().Set("Cache-Control", "no-cache, private")
	w.Header().Set("Vary", "Accept")
	ct := mimeJSON
	if aggregated {
		ct = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	}
	w.Header().Set("Content-Type", ct)
	_ = json.NewEncoder(w).Encode(obj)
}

func (s *Server) serveDiscovery(w http.ResponseWriter, req *http.Request) bool {
	path := strings.TrimSuffix(req.URL.Path, "/")
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch {
	case path == "/api":
		if wantsAggregated(req) {
			l := &apidiscoveryv2.APIGroupDiscoveryList{Items: []apidiscoveryv2.APIGroupDiscovery{s.groupDiscovery("")}}
			l.APIVersion, l.Kind = "apidiscovery.k8s.io/v2", "APIGroupDiscoveryList"
			s.writeDiscovery(w, l, true)
			return true
		}
		v := &metav1.APIVersions{Versions: []string{"v1"}, ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: req.Host}}}
		v.Kind = "APIVersions"
		s.writeDiscovery(w, v, false)
		return true
	case path == "/apis":
		if wantsAggregated(req) {
			l := &apidiscoveryv2.APIGroupDiscoveryList{}
			l.APIVersion, l.Kind = "apidiscovery.k8s.io/v2", "APIGroupDiscoveryList"
			for _, g := range s.groups() {
				l.Items = append(l.Items, s.groupDiscovery(g))
			}
			for _, g := range s.remoteOnlyGroups() {
				if d, ok := s.remoteGroupDiscovery(req.Context(), g); ok {
					l.Items = append(l.Items, d)
				}
			}
			s.writeDiscovery(w, l, true)
			return true
		}
		l := &metav1.APIGroupList{}
		l.APIVersion, l.Kind = "v1", "APIGroupList"
		for _, g := range s.groups() {
			l.Groups = append(l.Groups, *s.apiGroup(g))
		}
		for _, g := range s.remoteOnlyGroups() {
			l.Groups = append(l.Groups, *s.remoteAPIGroup(g[0].svc.Spec.Group))
		}
		s.writeDiscovery(w, l, false)
		return true
	case len(parts) == 2 && parts[0] == "api" && parts[1] == "v1":
		s.writeDiscovery(w, s.resourceList(schema.GroupVersion{Version: "v1"}), false)
		return true
	case len(parts) == 2 && parts[0] == "apis":
		if g := s.apiGroup(parts[1]); g != nil {
			s.writeDiscovery(w, g, false)
			return true
		}
	case len(parts) == 3 && parts[0] == "apis":
		gv := schema.GroupVersion{Group: parts[1], Version: parts[2]}
		for _, known := range s.table.GroupVersions() {
			if known == gv {
				s.writeDiscovery(w, s.resourceList(gv), false)
				return true
			}
		}
	}
	return false
}

// groups returns the named API groups in served order.
func (s *Server) groups() []string {
	var out []string
	seen := map[string]bool{}
	for _, gv := range s.table.GroupVersions() {
		if gv.Group != "" && !seen[gv.Group] {
			seen[gv.Group] = true
			out = append(out, gv.Group)
		}
	}
	return out
}

func (s *Server) apiGroup(name string) *metav1.APIGroup {
	var g *metav1.APIGroup
	for _, gv := range s.table.GroupVersions() {
		if gv.Group != name || name == "" {
			continue
		}
		if g == nil {
			g = &metav1.APIGroup{Name: name}
			g.APIVersion, g.Kind = "v1", "APIGroup"
		}
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		g.Versions = append(g.Versions, v)
		if g.PreferredVersion.Version == "" {
			g.PreferredVersion = v
		}
	}
	return g
}

// remoteGroupDiscovery is the aggregated discovery entry of a group served by remote
// APIServices, in their order: each version with the resources its extension server
// lists at /apis/<group>/<version>, Stale when the last attempt to ask failed (as
// upstream's discovery manager marks it). A version never discovered is left out;
// ok is false when no version is left.
func (s *Server) remoteGroupDiscovery(ctx context.Context, g []*remoteAPI) (apidiscoveryv2.APIGroupDiscovery, bool) {
	out := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g[0].svc.Spec.Group}}
	for _, r := range g {
		list, stale := s.remoteDiscovery(ctx, r)
		if list == nil {
			continue
		}
		v := aggregatedVersion(r.svc.Spec.Group, r.svc.Spec.Version, list)
		if stale {
			v.Freshness = apidiscoveryv2.DiscoveryFreshnessStale
		}
		out.Versions = append(out.Versions, v)
	}
	return out, len(out.Versions) > 0
}

// aggregatedVersion converts an APIResourceList to the aggregated discovery form: each
// resource with its subresources ("name/sub" entries) folded into it.
func aggregatedVersion(group, version string, list *metav1.APIResourceList) apidiscoveryv2.APIVersionDiscovery {
	v := apidiscoveryv2.APIVersionDiscovery{Version: version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
	index := map[string]int{}
	kindOf := func(r metav1.APIResource) *metav1.GroupVersionKind {
		if r.Kind == "" {
			return nil
		}
		gvk := &metav1.GroupVersionKind{Group: group, Version: version, Kind: r.Kind}
		if r.Group != "" || r.Version != "" {
			gvk.Group, gvk.Version = r.Group, r.Version
		}
		return gvk
	}
	for _, r := range list.APIResources {
		if strings.Contains(r.Name, "/") {
			continue
		}
		scope := apidiscoveryv2.ScopeCluster
		if r.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		index[r.Name] = len(v.Resources)
		v.Resources = append(v.Resources, apidiscoveryv2.APIResourceDiscovery{
			Resource: r.Name, SingularResource: r.SingularName, Scope: scope, Verbs: r.Verbs,
			ResponseKind: kindOf(r), ShortNames: r.ShortNames, Categories: r.Categories,
		})
	}
	for _, r := range list.APIResources {
		parent, sub, ok := strings.Cut(r.Name, "/")
		if !ok {
			continue
		}
		i, found := index[parent]
		if !found {
			continue
		}
		v.Resources[i].Subresources = append(v.Resources[i].Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource: sub, ResponseKind: kindOf(r), Verbs: r.Verbs,
		})
	}
	return v
}
