package openapi

import (
	"fmt"
	"reflect"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// subresourceKind says how a subresource's operations look.
type subresourceKind int

const (
	// subObject: get/put/patch of a whole object (status, scale, ...).
	subObject subresourceKind = iota
	// subCreate: post of a body (binding, eviction).
	subCreate
	// subLog: get returning text.
	subLog
	// subConnect: connect operations (exec, attach, portforward, proxy).
	subConnect
)

// subresourceInfo describes the operations of one subresource.
type subresourceInfo struct {
	name string
	kind subresourceKind
	// methods are the HTTP methods (lower case) documented.
	methods []string
	// body is the Go type of the request and response bodies; nil for log
	// and connect subresources.
	body reflect.Type
	// gvk is the group-version-kind of the operations.
	gvk schema.GroupVersionKind
}

// resourceInfo is a validated Resource with its reflected types.
type resourceInfo struct {
	res      *Resource
	gvk      schema.GroupVersionKind
	objType  reflect.Type
	listType reflect.Type
	verbs    map[string]bool
	subs     []subresourceInfo
}

func newResourceInfo(r *Resource) (*resourceInfo, error) {
	if r.GVK.Version == "" || r.GVK.Kind == "" {
		return nil, fmt.Errorf("incomplete group-version-kind %q", r.GVK.String())
	}
	if r.Plural == "" || strings.Contains(r.Plural, "/") {
		return nil, fmt.Errorf("invalid plural %q", r.Plural)
	}
	objType, err := structType(r.Object)
	if err != nil {
		return nil, fmt.Errorf("object: %w", err)
	}
	info := &resourceInfo{res: r, gvk: r.GVK, objType: objType}
	if r.List != nil {
		if info.listType, err = structType(r.List); err != nil {
			return nil, fmt.Errorf("list: %w", err)
		}
	}
	if len(r.Verbs) > 0 {
		info.verbs = map[string]bool{}
		for _, v := range r.Verbs {
			info.verbs[v] = true
		}
	}
	seen := map[string]bool{}
	for _, name := range r.Subresources {
		if seen[name] {
			continue
		}
		seen[name] = true
		sub, err := subresource(name, r.GVK, objType)
		if err != nil {
			return nil, err
		}
		info.subs = append(info.subs, sub)
	}
	return info, nil
}

// subresource describes the known subresources.
func subresource(name string, gvk schema.GroupVersionKind, objType reflect.Type) (subresourceInfo, error) {
	s := subresourceInfo{name: name, gvk: gvk}
	switch name {
	case "status", "ephemeralcontainers", "resize", "approval":
		s.kind, s.methods, s.body = subObject, []string{"get", "put", "patch"}, objType
	case "finalize":
		s.kind, s.methods, s.body = subObject, []string{"put"}, objType
	case "scale":
		s.kind, s.methods = subObject, []string{"get", "put", "patch"}
		s.body = reflect.TypeFor[autoscalingv1.Scale]()
		s.gvk = autoscalingv1.SchemeGroupVersion.WithKind("Scale")
	case "binding":
		s.kind, s.methods = subCreate, []string{"post"}
		s.body = reflect.TypeFor[corev1.Binding]()
		s.gvk = corev1.SchemeGroupVersion.WithKind("Binding")
	case "eviction":
		s.kind, s.methods = subCreate, []string{"post"}
		s.body = reflect.TypeFor[policyv1.Eviction]()
		s.gvk = policyv1.SchemeGroupVersion.WithKind("Eviction")
	case "token":
		s.kind, s.methods = subCreate, []string{"post"}
		s.body = reflect.TypeFor[authenticationv1.TokenRequest]()
		s.gvk = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")
	case "log":
		s.kind, s.methods = subLog, []string{"get"}
	case "exec", "attach", "portforward":
		s.kind, s.methods = subConnect, []string{"get", "post"}
		s.gvk.Kind = gvk.Kind + map[string]string{"exec": "ExecOptions", "attach": "AttachOptions", "portforward": "PortForwardOptions"}[name]
	case "proxy":
		s.kind, s.methods = subConnect, []string{"get", "post", "put", "delete"}
		s.gvk.Kind = gvk.Kind + "ProxyOptions"
	default:
		return s, fmt.Errorf("unsupported subresource %q", name)
	}
	return s, nil
}

// pathBuilder accumulates the paths of one group-version document and the
// components they reference. The first error is kept in err.
type pathBuilder struct {
	g      *generator
	gv     schema.GroupVersion
	prefix string // "/api/v1" or "/apis/<group>/<version>"
	camel  string // "CoreV1", "AppsV1", "RbacAuthorizationV1"
	tag    string // "core_v1", "apps_v1"
	paths  map[string]map[string]any
	refs   map[string]bool
	err    error
}

func newPathBuilder(g *generator, gv schema.GroupVersion) *pathBuilder {
	groupCamel := "Core"
	if gv.Group != "" {
		groupCamel = ""
		for part := range strings.SplitSeq(strings.TrimSuffix(gv.Group, ".k8s.io"), ".") {
			groupCamel += upperFirst(part)
		}
	}
	return &pathBuilder{
		g:      g,
		gv:     gv,
		prefix: "/" + gvPath(gv),
		camel:  groupCamel + upperFirst(gv.Version),
		tag:    lowerFirst(groupCamel) + "_" + gv.Version,
		paths:  map[string]map[string]any{},
		refs:   map[string]bool{},
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// ref returns a $ref to the component of t, recording it for the document.
func (pb *pathBuilder) ref(t reflect.Type) map[string]any {
	c, err := pb.g.ref(t)
	if err != nil {
		if pb.err == nil {
			pb.err = err
		}
		return map[string]any{}
	}
	pb.refs[c.name] = true
	return map[string]any{"$ref": schemaRefPrefix + c.name}
}

// operation is one documented HTTP operation.
type operation struct {
	method      string
	action      string
	id          string
	description string
	gvk         schema.GroupVersionKind
	params      []map[string]any
	body        map[string]any // requestBody, or nil
	responses   map[string]any
}

func (pb *pathBuilder) add(path string, op operation) {
	item := pb.paths[path]
	if item == nil {
		item = map[string]any{}
		pb.paths[path] = item
	}
	o := map[string]any{
		"tags":                            []string{pb.tag},
		"description":                     op.description,
		"operationId":                     op.id,
		"responses":                       op.responses,
		"x-kubernetes-action":             op.action,
		"x-kubernetes-group-version-kind": gvkExtension(op.gvk),
	}
	if len(op.params) > 0 {
		o["parameters"] = op.params
	}
	if op.body != nil {
		o["requestBody"] = op.body
	}
	item[op.method] = o
}

// jsonContent is a content map serving schema as application/json.
func jsonContent(s map[string]any, extraTypes ...string) map[string]any {
	content := map[string]any{"application/json": map[string]any{"schema": s}}
	for _, t := range extraTypes {
		content[t] = map[string]any{"schema": s}
	}
	return content
}

// responses builds a responses object: each code maps to the schema, plus 401.
func responses(s map[string]any, codes ...string) map[string]any {
	out := map[string]any{"401": map[string]any{"description": "Unauthorized"}}
	for _, code := range codes {
		out[code] = map[string]any{"description": statusText(code), "content": jsonContent(s)}
	}
	return out
}

func statusText(code string) string {
	switch code {
	case "200":
		return "OK"
	case "201":
		return "Created"
	case "202":
		return "Accepted"
	}
	return code
}

func jsonBody(s map[string]any) map[string]any {
	return map[string]any{"content": jsonContent(s), "required": true}
}

// patchBody lists the patch content types the server accepts. It leaves out
// application/strategic-merge-patch+json on purpose: kubectl apply then
// builds its strategic merge patch from its compiled-in Go types.
func (pb *pathBuilder) patchBody() map[string]any {
	p := pb.ref(reflect.TypeFor[metav1.Patch]())
	content := map[string]any{}
	for _, t := range []string{"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"} {
		content[t] = map[string]any{"schema": p}
	}
	return map[string]any{"content": content, "required": true}
}

// addResource documents the collection, object and subresource paths of one
// resource.
func (pb *pathBuilder) addResource(info *resourceInfo) error {
	r, kind := info.res, info.gvk.Kind
	allowed := func(verb string) bool { return info.verbs == nil || info.verbs[verb] }
	scope, collection := "", pb.prefix+"/"+r.Plural
	var scopeParams []map[string]any
	if r.Namespaced {
		scope = "Namespaced"
		collection = pb.prefix + "/namespaces/{namespace}/" + r.Plural
		scopeParams = []map[string]any{pathParam("namespace", "object name and auth scope, such as for teams and projects")}
	}
	item := collection + "/{name}"
	itemParams := append(append([]map[string]any{}, scopeParams...), pathParam("name", "name of the "+kind))
	obj := pb.ref(info.objType)
	status := pb.ref(reflect.TypeFor[metav1.Status]())
	deleteOptions := pb.ref(reflect.TypeFor[metav1.DeleteOptions]())
	id := func(verb, middle string) string { return verb + pb.camel + middle }

	if info.listType != nil && allowed("list") {
		list := pb.ref(info.listType)
		listResponses := map[string]any{
			"200": map[string]any{"description": "OK", "content": jsonContent(list, "application/json;stream=watch")},
			"401": map[string]any{"description": "Unauthorized"},
		}
		pb.add(collection, operation{
			method: "get", action: "list", id: id("list", scope+kind),
			description: "list or watch objects of kind " + kind, gvk: info.gvk,
			params: concat(scopeParams, listParams()), responses: listResponses,
		})
		if r.Namespaced {
			pb.add(pb.prefix+"/"+r.Plural, operation{
				method: "get", action: "list", id: id("list", kind+"ForAllNamespaces"),
				description: "list or watch objects of kind " + kind, gvk: info.gvk,
				params: listParams(), responses: listResponses,
			})
		}
	}
	if allowed("create") {
		pb.add(collection, operation{
			method: "post", action: "post", id: id("create", scope+kind),
			description: "create a " + kind, gvk: info.gvk,
			params: concat(scopeParams, writeParams()), body: jsonBody(obj),
			responses: responses(obj, "200", "201", "202"),
		})
	}
	if info.listType != nil && allowed("deletecollection") {
		pb.add(collection, operation{
			method: "delete", action: "deletecollection", id: id("delete", "Collection"+scope+kind),
			description: "delete collection of " + kind, gvk: info.gvk,
			params: concat(scopeParams, deleteCollectionParams()), body: jsonBody(deleteOptions),
			responses: responses(status, "200"),
		})
	}
	if allowed("get") {
		pb.add(item, operation{
			method: "get", action: "get", id: id("read", scope+kind),
			description: "read the specified " + kind, gvk: info.gvk,
			params: concat(itemParams, prettyParams()), responses: responses(obj, "200"),
		})
	}
	if allowed("update") {
		pb.add(item, operation{
			method: "put", action: "put", id: id("replace", scope+kind),
			description: "replace the specified " + kind, gvk: info.gvk,
			params: concat(itemParams, writeParams()), body: jsonBody(obj),
			responses: responses(obj, "200", "201"),
		})
	}
	if allowed("patch") {
		pb.add(item, operation{
			method: "patch", action: "patch", id: id("patch", scope+kind),
			description: "partially update the specified " + kind, gvk: info.gvk,
			params: concat(itemParams, patchParams()), body: pb.patchBody(),
			responses: responses(obj, "200", "201"),
		})
	}
	if allowed("delete") {
		pb.add(item, operation{
			method: "delete", action: "delete", id: id("delete", scope+kind),
			description: "delete a " + kind, gvk: info.gvk,
			params: concat(itemParams, deleteParams()), body: jsonBody(deleteOptions),
			responses: responses(status, "200", "202"),
		})
	}

	for _, sub := range info.subs {
		pb.addSubresource(info, sub, item, itemParams, scope)
	}
	return pb.err
}

// addSubresource documents the operations of one subresource.
func (pb *pathBuilder) addSubresource(info *resourceInfo, sub subresourceInfo, item string, itemParams []map[string]any, scope string) {
	kind := info.gvk.Kind
	path := item + "/" + sub.name
	suffix := scope + kind + upperFirst(sub.name)
	id := func(verb string) string { return verb + pb.camel + suffix }
	switch sub.kind {
	case subObject:
		body := pb.ref(sub.body)
		for _, m := range sub.methods {
			op := operation{method: m, gvk: sub.gvk}
			switch m {
			case "get":
				op.action, op.id = "get", id("read")
				op.description = "read " + sub.name + " of the specified " + kind
				op.params, op.responses = concat(itemParams, prettyParams()), responses(body, "200")
			case "put":
				op.action, op.id = "put", id("replace")
				op.description = "replace " + sub.name + " of the specified " + kind
				op.params, op.body = concat(itemParams, writeParams()), jsonBody(body)
				op.responses = responses(body, "200", "201")
			case "patch":
				op.action, op.id = "patch", id("patch")
				op.description = "partially update " + sub.name + " of the specified " + kind
				op.params, op.body = concat(itemParams, patchParams()), pb.patchBody()
				op.responses = responses(body, "200", "201")
			}
			pb.add(path, op)
		}
	case subCreate:
		body := pb.ref(sub.body)
		pb.add(path, operation{
			method: "post", action: "post", id: id("create"),
			description: "create " + sub.name + " of a " + kind, gvk: sub.gvk,
			params: concat(itemParams, writeParams()), body: jsonBody(body),
			responses: responses(body, "200", "201", "202"),
		})
	case subLog:
		text := map[string]any{"type": "string"}
		pb.add(path, operation{
			method: "get", action: "get", id: id("read"),
			description: "read log of the specified " + kind, gvk: sub.gvk,
			params: concat(itemParams, logParams()),
			responses: map[string]any{
				"200": map[string]any{"description": "OK", "content": map[string]any{"text/plain": map[string]any{"schema": text}}},
				"401": map[string]any{"description": "Unauthorized"},
			},
		})
	case subConnect:
		params := concat(itemParams, connectParams(sub.name))
		text := map[string]any{"type": "string"}
		for _, m := range sub.methods {
			method := upperFirst(m)
			op := operation{
				method: m, action: "connect", id: "connect" + method + pb.camel + suffix,
				description: "connect " + strings.ToUpper(m) + " requests to " + sub.name + " of " + kind,
				gvk:         sub.gvk, params: params,
				responses: map[string]any{
					"200": map[string]any{"description": "OK", "content": map[string]any{"*/*": map[string]any{"schema": text}}},
					"401": map[string]any{"description": "Unauthorized"},
				},
			}
			pb.add(path, op)
			if sub.name == "proxy" {
				op.id = "connect" + method + pb.camel + suffix + "WithPath"
				op.params = concat(op.params, []map[string]any{pathParam("path", "path to the resource")})
				pb.add(path+"/{path}", op)
			}
		}
	}
}

// addDiscoveryPath documents GET <prefix>/ returning the APIResourceList.
func (pb *pathBuilder) addDiscoveryPath() {
	list := pb.ref(reflect.TypeFor[metav1.APIResourceList]())
	pb.paths[pb.prefix+"/"] = map[string]any{
		"get": map[string]any{
			"tags":        []string{pb.tag},
			"description": "get available resources",
			"operationId": "get" + pb.camel + "APIResources",
			"responses":   responses(list, "200"),
		},
	}
}

func concat(lists ...[]map[string]any) []map[string]any {
	var out []map[string]any
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func pathParam(name, description string) map[string]any {
	return map[string]any{
		"name": name, "in": "path", "description": description, "required": true,
		"schema": map[string]any{"type": "string", "uniqueItems": true},
	}
}

func queryParam(name, typ, description string) map[string]any {
	return map[string]any{
		"name": name, "in": "query", "description": description,
		"schema": map[string]any{"type": typ, "uniqueItems": true},
	}
}

func prettyParams() []map[string]any {
	return []map[string]any{queryParam("pretty", "string", "If 'true', the output is pretty printed.")}
}

func dryRunParam() map[string]any {
	return queryParam("dryRun", "string", "When present, the request is processed as usual but nothing is persisted. The only valid value is All.")
}

func writeParams() []map[string]any {
	return []map[string]any{
		dryRunParam(),
		queryParam("fieldManager", "string", "Name of the actor making the change, recorded in managedFields. At most 128 printable characters."),
		queryParam("fieldValidation", "string", "How to treat unknown or duplicate fields in the request body: Ignore drops them silently, Warn drops them and returns a warning header for each, Strict rejects the request with a BadRequest error listing them."),
		prettyParams()[0],
	}
}

func patchParams() []map[string]any {
	return append(writeParams(),
		queryParam("force", "boolean", "Force an apply patch to take ownership of fields managed by others. Must be unset for other patch types."))
}

func deleteParams() []map[string]any {
	return []map[string]any{
		dryRunParam(),
		queryParam("gracePeriodSeconds", "integer", "Seconds to wait before the object is deleted; zero deletes immediately. Unset uses the default of the type."),
		queryParam("orphanDependents", "boolean", "Deprecated: use propagationPolicy. Whether dependents are orphaned."),
		queryParam("propagationPolicy", "string", "Garbage collection policy for dependents: Orphan, Background or Foreground."),
		prettyParams()[0],
	}
}

func listParams() []map[string]any {
	return []map[string]any{
		queryParam("allowWatchBookmarks", "boolean", "Ask for BOOKMARK events on a watch. Ignored for lists."),
		queryParam("continue", "string", "Token from a previous chunked list response to fetch the next chunk."),
		queryParam("fieldSelector", "string", "Restrict the returned objects by their fields. Defaults to everything."),
		queryParam("labelSelector", "string", "Restrict the returned objects by their labels. Defaults to everything."),
		queryParam("limit", "integer", "Maximum number of objects to return; a continue token is returned when more exist."),
		prettyParams()[0],
		queryParam("resourceVersion", "string", "Constraint on the resource version the request may be served from."),
		queryParam("resourceVersionMatch", "string", "How resourceVersion is applied: Exact or NotOlderThan."),
		queryParam("sendInitialEvents", "boolean", "With watch=true, start the watch with synthetic ADDED events for the current objects followed by a BOOKMARK."),
		queryParam("timeoutSeconds", "integer", "Timeout of the list or watch call."),
		queryParam("watch", "boolean", "Stream add, update and delete notifications instead of returning a list."),
	}
}

func deleteCollectionParams() []map[string]any {
	out := deleteParams()
	for _, p := range listParams() {
		switch p["name"] {
		case "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds":
			out = append(out, p)
		}
	}
	return out
}

func logParams() []map[string]any {
	return []map[string]any{
		queryParam("container", "string", "The container to stream logs of; may be omitted if the pod has one container."),
		queryParam("follow", "boolean", "Follow the log stream."),
		queryParam("insecureSkipTLSVerifyBackend", "boolean", "Do not verify the serving certificate of the kubelet the logs come from."),
		queryParam("limitBytes", "integer", "Stop after this many bytes of log output."),
		prettyParams()[0],
		queryParam("previous", "boolean", "Return the logs of the previous, terminated container instance."),
		queryParam("sinceSeconds", "integer", "Only return logs newer than this many seconds."),
		queryParam("sinceTime", "string", "Only return logs after this RFC 3339 time."),
		queryParam("tailLines", "integer", "Only return this many lines from the end of the log."),
		queryParam("timestamps", "boolean", "Prefix every line with an RFC 3339 timestamp."),
	}
}

func connectParams(sub string) []map[string]any {
	streams := []map[string]any{
		queryParam("container", "string", "The container to connect to."),
		queryParam("stderr", "boolean", "Redirect the standard error stream of the container."),
		queryParam("stdin", "boolean", "Redirect the standard input stream of the container."),
		queryParam("stdout", "boolean", "Redirect the standard output stream of the container."),
		queryParam("tty", "boolean", "Allocate a TTY for the connection."),
	}
	switch sub {
	case "exec":
		return append([]map[string]any{queryParam("command", "string", "The command to run; repeat for each argument.")}, streams...)
	case "attach":
		return streams
	case "portforward":
		return []map[string]any{queryParam("ports", "integer", "Port to forward.")}
	case "proxy":
		return []map[string]any{queryParam("path", "string", "Path to proxy the request to.")}
	}
	return nil
}
