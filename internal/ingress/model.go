package ingress

import (
	"cmp"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/kubette/kubette/internal/ingress/nginx"
)

// Inputs are the API objects a configuration is built from.
type Inputs struct {
	// Ingresses are the Ingresses this controller serves (class already
	// checked).
	Ingresses []*networkingv1.Ingress
	Services  []*corev1.Service
	Slices    []*discoveryv1.EndpointSlice
	Secrets   []*corev1.Secret
}

// Layout is where nginx runs and listens.
type Layout struct {
	// Prefix is the nginx directory (Config.Prefix); certificates go to
	// Prefix/certs.
	Prefix              string
	ListenAddress       string
	HTTPPort, HTTPSPort int
	WorkerProcesses     string
	// Lua, when set, makes endpoints dynamic (nginx.Config.Lua): every
	// resolved backend gets an upstream, even without ready endpoints (it
	// answers 503 until it has some), so that endpoint changes leave the
	// rendered configuration unchanged.
	Lua *nginx.Lua
}

// Problem is something wrong with one Ingress, reported as a Warning event.
type Problem struct {
	// Ingress is "namespace/name".
	Ingress string
	// Reason is the event reason (CamelCase).
	Reason string
	// Message says what is wrong.
	Message string
}

// Model is a built configuration.
type Model struct {
	// Config is what nginx.Render renders.
	Config nginx.Config
	// Certs maps certificate file paths (under Layout.Prefix/certs) to
	// their contents (PEM chain then key).
	Certs map[string][]byte
	// Served are "namespace/name" of the Ingresses in Config (an Ingress
	// with invalid annotations is left out).
	Served []string
	// Problems are sorted by Ingress, Reason, Message.
	Problems []Problem
}

// Reasons of Problems.
const (
	ReasonInvalidAnnotation = "InvalidAnnotation"
	ReasonInvalidPath       = "InvalidPath"
	ReasonMissingService    = "MissingService"
	ReasonMissingPort       = "MissingServicePort"
	ReasonUnsupported       = "UnsupportedBackend"
	ReasonTLSSecret         = "InvalidTLSSecret"
	ReasonRejected          = "RejectedByNginx"
	ReasonReloadFailed      = "ReloadFailed"
)

// priorities of locations with the same key: lower wins; ties go to the
// older Ingress.
const (
	prioExact = iota
	prioPrefix
	prioImpl
	prioDefault
)

type locKey struct {
	exact bool
	path  string
}

type candidate struct {
	prio     int
	loc      nginx.Location
	redirect bool
}

type hostState struct {
	tls  *nginx.TLS
	locs map[locKey]candidate
}

func (h *hostState) add(k locKey, c candidate) {
	if old, ok := h.locs[k]; ok && old.prio <= c.prio {
		return
	}
	h.locs[k] = c
}

type builder struct {
	layout    Layout
	services  map[string]*corev1.Service
	slices    map[string][]*discoveryv1.EndpointSlice
	secrets   map[string]*corev1.Secret
	upstreams map[string]nginx.Upstream
	hosts     map[string]*hostState
	def       *hostState
	model     Model
}

// safePath is what a path may contain to be written into nginx.conf unquoted.
var safePath = regexp.MustCompile(`^/[A-Za-z0-9._~%!*+,=:@/-]*$`)

// Build turns in into an nginx configuration. It is a pure function.
//
// Ingresses are taken oldest first (creation time, then namespace/name); when
// two define the same location of a host, or a certificate for the same host,
// or a default backend, the older one wins. For equal paths an Exact path wins
// over a Prefix path, which wins over an ImplementationSpecific one.
func Build(l Layout, in Inputs) Model {
	b := &builder{
		layout:    l,
		services:  map[string]*corev1.Service{},
		slices:    map[string][]*discoveryv1.EndpointSlice{},
		secrets:   map[string]*corev1.Secret{},
		upstreams: map[string]nginx.Upstream{},
		hosts:     map[string]*hostState{},
		def:       &hostState{locs: map[locKey]candidate{}},
		model:     Model{Certs: map[string][]byte{}},
	}
	for _, s := range in.Services {
		b.services[s.Namespace+"/"+s.Name] = s
	}
	for _, s := range in.Slices {
		if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
			b.slices[s.Namespace+"/"+name] = append(b.slices[s.Namespace+"/"+name], s)
		}
	}
	for _, s := range in.Secrets {
		b.secrets[s.Namespace+"/"+s.Name] = s
	}
	ings := slices.Clone(in.Ingresses)
	slices.SortFunc(ings, func(a, c *networkingv1.Ingress) int {
		if r := a.CreationTimestamp.Compare(c.CreationTimestamp.Time); r != 0 {
			return r
		}
		return cmp.Compare(a.Namespace+"/"+a.Name, c.Namespace+"/"+c.Name)
	})
	for _, ing := range ings {
		b.ingress(ing)
	}
	c := nginx.Config{
		Prefix: l.Prefix, ListenAddress: l.ListenAddress, HTTPPort: l.HTTPPort, HTTPSPort: l.HTTPSPort,
		WorkerProcesses: l.WorkerProcesses, Lua: l.Lua,
	}
	c.Default = b.server("", b.def)
	hosts := make([]string, 0, len(b.hosts))
	for h := range b.hosts {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		c.Servers = append(c.Servers, b.server(h, b.hosts[h]))
	}
	for _, u := range b.upstreams {
		c.Upstreams = append(c.Upstreams, u)
	}
	slices.SortFunc(c.Upstreams, func(a, b nginx.Upstream) int { return cmp.Compare(a.Name, b.Name) })
	b.model.Config = c
	slices.Sort(b.model.Served)
	slices.SortFunc(b.model.Problems, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Ingress, b.Ingress), cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Message, b.Message))
	})
	b.model.Problems = slices.Compact(b.model.Problems)
	return b.model
}

func (b *builder) problem(owner, reason, format string, args ...any) {
	b.model.Problems = append(b.model.Problems, Problem{Ingress: owner, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

func (b *builder) host(h string) *hostState {
	if h == "" {
		return b.def
	}
	s := b.hosts[h]
	if s == nil {
		s = &hostState{locs: map[locKey]candidate{}}
		b.hosts[h] = s
	}
	return s
}

func (b *builder) ingress(ing *networkingv1.Ingress) {
	owner := ing.Namespace + "/" + ing.Name
	st, err := parseAnnotations(ing.Annotations)
	if err != nil {
		b.problem(owner, ReasonInvalidAnnotation, "%v; the Ingress is not served", err)
		return
	}
	b.model.Served = append(b.model.Served, owner)
	b.tls(ing, owner)
	var def *nginx.Location
	if ing.Spec.DefaultBackend != nil {
		l := b.location(ing.Namespace, owner, *ing.Spec.DefaultBackend, st, "default backend")
		def = &l
		l.Match, l.Path = nginx.MatchPrefix, "/"
		b.def.add(locKey{path: "/"}, candidate{prio: prioDefault, loc: l, redirect: st.sslRedirect})
	}
	for _, rule := range ing.Spec.Rules {
		hs := b.host(rule.Host)
		hasRoot := false
		if rule.HTTP != nil {
			for _, p := range rule.HTTP.Paths {
				if b.path(hs, ing.Namespace, owner, p, st) {
					hasRoot = true
				}
			}
		}
		if def != nil && !hasRoot && rule.Host != "" {
			hs.add(locKey{path: "/"}, candidate{prio: prioDefault, loc: *def, redirect: st.sslRedirect})
		}
	}
}

// path adds the locations of one Ingress path; it reports whether the path
// covers "/" (Prefix or ImplementationSpecific "/").
func (b *builder) path(hs *hostState, ns, owner string, p networkingv1.HTTPIngressPath, st settings) bool {
	pt := networkingv1.PathTypeImplementationSpecific
	if p.PathType != nil {
		pt = *p.PathType
	}
	ps := p.Path
	if ps == "" {
		ps = "/"
	}
	if !safePath.MatchString(ps) || strings.Contains(ps, "//") && pt != networkingv1.PathTypeImplementationSpecific {
		b.problem(owner, ReasonInvalidPath, "path %q: want an absolute path of URL characters; the path is not served", ps)
		return false
	}
	desc := fmt.Sprintf("%s %s", pt, ps)
	loc := b.location(ns, owner, p.Backend, st, desc)
	add := func(k locKey, prio int, rw []nginx.Rewrite) {
		l := loc
		l.Path = k.path
		l.Match = nginx.MatchPrefix
		if k.exact {
			l.Match = nginx.MatchExact
		}
		if st.rewriteTarget != "" && l.Status == 0 {
			l.Rewrites = rw
		}
		hs.add(k, candidate{prio: prio, loc: l, redirect: st.sslRedirect})
	}
	switch pt {
	case networkingv1.PathTypeExact:
		add(locKey{exact: true, path: ps}, prioExact, exactRewrite(ps, st.rewriteTarget))
	case networkingv1.PathTypePrefix:
		base := strings.TrimRight(ps, "/")
		rw := prefixRewrite(base, st.rewriteTarget)
		if base == "" {
			add(locKey{path: "/"}, prioPrefix, rw)
			return true
		}
		add(locKey{exact: true, path: base}, prioPrefix, rw)
		add(locKey{path: base + "/"}, prioPrefix, rw)
	default:
		// ImplementationSpecific: a plain string prefix, as upstream's
		// ingress-nginx without use-regex.
		add(locKey{path: ps}, prioImpl, implRewrite(ps, st.rewriteTarget))
		return ps == "/"
	}
	return false
}

func exactRewrite(p, target string) []nginx.Rewrite {
	return []nginx.Rewrite{{Regex: "^" + regexp.QuoteMeta(p) + "$", Replacement: target}}
}

// prefixRewrite replaces the element-wise prefix base ("" for "/") with
// target: with target /v2, /api → /v2 and /api/x → /v2/x; with target /,
// /api → / and /api/x → /x.
func prefixRewrite(base, target string) []nginx.Rewrite {
	t := strings.TrimRight(target, "/")
	q := regexp.QuoteMeta(base)
	if t == "" {
		return []nginx.Rewrite{{Regex: "^" + q + "/?$", Replacement: "/"}, {Regex: "^" + q + "(/.*)$", Replacement: "$1"}}
	}
	return []nginx.Rewrite{{Regex: "^" + q + "(/.*)?$", Replacement: t + "$1"}}
}

// implRewrite replaces the string prefix p with target.
func implRewrite(p, target string) []nginx.Rewrite {
	q := regexp.QuoteMeta(p)
	if strings.HasSuffix(target, "/") && strings.HasSuffix(p, "/") || target == "/" {
		return []nginx.Rewrite{{Regex: "^" + q + "/?(.*)$", Replacement: strings.TrimRight(target, "/") + "/$1"}}
	}
	return []nginx.Rewrite{{Regex: "^" + q + "(.*)$", Replacement: target + "$1"}}
}

// location resolves a backend into a location without its match and path.
func (b *builder) location(ns, owner string, be networkingv1.IngressBackend, st settings, desc string) nginx.Location {
	l := nginx.Location{
		Owner: owner, BodySize: st.bodySize,
		ConnectTimeout: st.connectTimeout, ReadTimeout: st.readTimeout, SendTimeout: st.sendTimeout,
	}
	if be.Service == nil {
		b.problem(owner, ReasonUnsupported, "%s: only Service backends are supported; it answers 503", desc)
		l.Status, l.Comment = 503, desc+" -> unsupported backend"
		return l
	}
	port := be.Service.Port.Name
	if port == "" {
		port = strconv.Itoa(int(be.Service.Port.Number))
	}
	target := be.Service.Name + ":" + port
	l.Comment = desc + " -> " + target
	svc := b.services[ns+"/"+be.Service.Name]
	if svc == nil {
		b.problem(owner, ReasonMissingService, "%s: service %s/%s not found; it answers 503", desc, ns, be.Service.Name)
		l.Status, l.Comment = 503, l.Comment+" (no such service)"
		return l
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		b.problem(owner, ReasonUnsupported, "%s: ExternalName service %s/%s is not supported; it answers 503", desc, ns, svc.Name)
		l.Status, l.Comment = 503, l.Comment+" (ExternalName)"
		return l
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if (be.Service.Port.Name != "" && p.Name == be.Service.Port.Name) ||
			(be.Service.Port.Name == "" && p.Port == be.Service.Port.Number) {
			if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
				sp = p
				break
			}
		}
	}
	if sp == nil {
		b.problem(owner, ReasonMissingPort, "%s: service %s/%s has no TCP port %s; it answers 503", desc, ns, svc.Name, port)
		l.Status, l.Comment = 503, l.Comment+" (no such port)"
		return l
	}
	name := fmt.Sprintf("%s_%s_%d", ns, svc.Name, sp.Port)
	if u, ok := b.upstreams[name]; ok {
		l.Upstream = u.Name
		return l
	}
	addrs := b.endpoints(ns+"/"+svc.Name, sp.Name)
	if len(addrs) == 0 && b.layout.Lua == nil {
		l.Status, l.Comment = 503, l.Comment+" (no ready endpoints)"
		return l
	}
	b.upstreams[name] = nginx.Upstream{Name: name, Servers: addrs}
	l.Upstream = name
	return l
}

// endpoints lists the ready "ip:port" of a service port, sorted: the port
// number comes from the slice port named like the service port, so named
// targetPorts are resolved by the EndpointSlice controller.
func (b *builder) endpoints(svc, portName string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range b.slices[svc] {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		port := int32(0)
		for _, p := range s.Ports {
			if p.Port == nil || (p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) {
				continue
			}
			if ptrOr(p.Name, "") == portName {
				port = *p.Port
				break
			}
		}
		if port == 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if !ptrOr(e.Conditions.Ready, true) {
				continue
			}
			for _, a := range e.Addresses {
				if net.ParseIP(a) == nil {
					continue
				}
				hp := net.JoinHostPort(a, strconv.Itoa(int(port)))
				if !seen[hp] {
					seen[hp] = true
					out = append(out, hp)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// tls records the certificates of an Ingress for its hosts; a TLS entry
// without hosts covers the hosts of the Ingress's rules.
func (b *builder) tls(ing *networkingv1.Ingress, owner string) {
	for _, t := range ing.Spec.TLS {
		hosts := t.Hosts
		if len(hosts) == 0 {
			for _, r := range ing.Spec.Rules {
				if r.Host != "" {
					hosts = append(hosts, r.Host)
				}
			}
		}
		if len(hosts) == 0 {
			continue
		}
		sec := b.secrets[ing.Namespace+"/"+t.SecretName]
		if sec == nil {
			b.problem(owner, ReasonTLSSecret, "TLS secret %s/%s not found; hosts %s are served without TLS", ing.Namespace, t.SecretName, strings.Join(hosts, ","))
			continue
		}
		crt, key := sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey]
		if sec.Type != corev1.SecretTypeTLS || len(crt) == 0 || len(key) == 0 {
			b.problem(owner, ReasonTLSSecret, "secret %s/%s is not a %s secret with %s and %s; hosts %s are served without TLS",
				ing.Namespace, t.SecretName, corev1.SecretTypeTLS, corev1.TLSCertKey, corev1.TLSPrivateKeyKey, strings.Join(hosts, ","))
			continue
		}
		if _, err := tls.X509KeyPair(crt, key); err != nil {
			b.problem(owner, ReasonTLSSecret, "secret %s/%s: %v; hosts %s are served without TLS", ing.Namespace, t.SecretName, err, strings.Join(hosts, ","))
			continue
		}
		pem := make([]byte, 0, len(crt)+len(key)+1)
		pem = append(append(append(pem, crt...), '\n'), key...)
		sum := sha256.Sum256(pem)
		file := path.Join(b.layout.Prefix, "certs", fmt.Sprintf("%s_%s-%s.pem", ing.Namespace, t.SecretName, hex.EncodeToString(sum[:8])))
		b.model.Certs[file] = pem
		for _, h := range hosts {
			hs := b.host(h)
			if hs.tls == nil {
				hs.tls = &nginx.TLS{File: file, Owner: owner}
			}
		}
	}
}

// server turns a host's locations into a server, longest paths first.
func (b *builder) server(host string, hs *hostState) nginx.Server {
	s := nginx.Server{Host: host}
	if host != "" {
		s.TLS = hs.tls
	}
	keys := make([]locKey, 0, len(hs.locs))
	for k := range hs.locs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, c locKey) int {
		if r := cmp.Compare(len(c.path), len(a.path)); r != 0 {
			return r
		}
		if a.exact != c.exact {
			if a.exact {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.path, c.path)
	})
	for _, k := range keys {
		c := hs.locs[k]
		l := c.loc
		l.RedirectHTTPS = s.TLS != nil && c.redirect
		s.Locations = append(s.Locations, l)
	}
	return s
}
