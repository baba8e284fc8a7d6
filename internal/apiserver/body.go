package apiserver

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// maxBodyBytes is the largest request body accepted, as upstream (3 MiB).
const maxBodyBytes = 3 * 1024 * 1024

// readBody reads a request body up to the limit (413 beyond it). A body of a declared
// length (net/http ends it there) is read into a slice of that size at once; other
// bodies grow as they come.
func readBody(req *http.Request) ([]byte, error) {
	if n := req.ContentLength; n >= 0 && n <= maxBodyBytes && req.Header.Get("Content-Encoding") == "" {
		data := make([]byte, n)
		if _, err := io.ReadFull(req.Body, data); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to read request body: %v", err))
		}
		return data, nil
	}
	if req.ContentLength > maxBodyBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", maxBodyBytes))
	}
	data, err := io.ReadAll(io.LimitReader(req.Body, maxBodyBytes+1))
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to read request body: %v", err))
	}
	if len(data) > maxBodyBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", maxBodyBytes))
	}
	return data, nil
}

// bodyMediaType returns the media type of the request body without parameters.
func bodyMediaType(req *http.Request) string {
	ct := req.Header.Get("Content-Type")
	if ct == "" {
		return mimeJSON
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ct
	}
	return mt
}

// decodeInto decodes a request body of the given media type into into, which must be
// of kind gvk. It returns warnings for unknown or duplicate fields unless validation is
// Strict, in which case they are a 400 error, or Ignore.
func (s *Server) decodeInto(data []byte, mediaType string, gvk schema.GroupVersionKind, into runtime.Object, validation string) ([]string, error) {
	if u, ok := into.(*unstructured.Unstructured); ok {
		return s.decodeCustom(data, mediaType, gvk, u, validation)
	}
	switch mediaType {
	case mimeProtobuf:
		obj, actual, err := s.codecs.proto.Decode(data, &gvk, into)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to decode protobuf body: %v", err))
		}
		if actual != nil && *actual != gvk && !(gvk.Kind == "DeleteOptions" && actual.Kind == gvk.Kind) {
			return nil, kindMismatch(gvk, *actual)
		}
		if obj != into {
			return nil, apierrors.NewBadRequest("unexpected object in protobuf body")
		}
		return nil, nil
	case mimeJSON, mimeYAML, "application/x-yaml", "text/yaml", "":
	default:
		return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "", fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got %s)", mediaType), 0, false)
	}
	if mediaType != mimeJSON {
		j, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error converting YAML to JSON: %v", err))
		}
		data = j
	}
	ser := k8sjson.NewSerializerWithOptions(k8sjson.DefaultMetaFactory, s.scheme, s.scheme, k8sjson.SerializerOptions{Strict: validation != "Ignore"})
	_, actual, err := ser.Decode(data, &gvk, into)
	var warnings []string
	if err != nil {
		strict, ok := runtime.AsStrictDecodingError(err)
		if !ok {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %s", gvk.Kind, gvk.Version, gvk.Kind, strings.TrimPrefix(err.Error(), "json: ")))
		}
		for _, e := range strict.Errors() {
			warnings = append(warnings, e.Error())
		}
		if validation == "Strict" {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: strict decoding error: %s", gvk.Kind, gvk.Version, gvk.Kind, strings.Join(warnings, ", ")))
		}
	}
	// DeleteOptions are registered in every group-version; accept any of them.
	if gvk.Kind == "DeleteOptions" && actual != nil && (actual.Kind == "" || actual.Kind == gvk.Kind) {
		return warnings, nil
	}
	if actual != nil && (actual.Kind != "" && actual.Kind != gvk.Kind || actual.GroupVersion() != gvk.GroupVersion() && actual.Version != "") {
		return nil, kindMismatch(gvk, *actual)
	}
	into.GetObjectKind().SetGroupVersionKind(gvk)
	return warnings, nil
}

// decodeCustom decodes the body of a custom resource request (JSON or YAML, as
// upstream serves them: no protobuf) and reads it by its version's schema as
// upstream's codec does: its metadata is checked, fields the schema does not know are
// pruned (warnings, or a 400 with Strict) and duplicate fields reported the same way.
func (s *Server) decodeCustom(data []byte, mediaType string, gvk schema.GroupVersionKind, into *unstructured.Unstructured, validation string) ([]string, error) {
	switch mediaType {
	case mimeJSON, mimeYAML, "application/x-yaml", "text/yaml", "":
	default:
		return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "", fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got %s)", mediaType), 0, false)
	}
	if mediaType != mimeJSON {
		j, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error converting YAML to JSON: %v", err))
		}
		data = j
	}
	cannot := func(msg string) error {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %s", gvk.Kind, gvk.Version, gvk.Kind, msg))
	}
	var m map[string]any
	strictErrs, err := kjson.UnmarshalStrict(data, &m, kjson.DisallowDuplicateFields)
	if err != nil {
		return nil, cannot(strings.TrimPrefix(err.Error(), "json: "))
	}
	if m == nil {
		return nil, cannot("the body is not a JSON object")
	}
	var strict []string
	if validation != "Ignore" {
		for _, e := range strictErrs {
			strict = append(strict, e.Error())
		}
	}
	into.Object = m
	actual := into.GroupVersionKind()
	if (actual.Kind != "" && actual.Kind != gvk.Kind) || (into.GetAPIVersion() != "" && actual.GroupVersion() != gvk.GroupVersion()) {
		return nil, kindMismatch(gvk, actual)
	}
	into.SetGroupVersionKind(gvk)
	r, ok := s.table.ForKind(gvk)
	if !ok || r.Custom == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("%s is not a custom resource served here", gvk))
	}
	unknown, err := r.Normalize(into, true)
	if err != nil {
		return nil, cannot(err.Error())
	}
	if validation != "Ignore" {
		for _, p := range unknown {
			strict = append(strict, fmt.Sprintf("unknown field %q", p))
		}
	}
	if validation == "Strict" && len(strict) > 0 {
		return nil, cannot("strict decoding error: " + strings.Join(strict, ", "))
	}
	return strict, nil
}

func kindMismatch(want, got schema.GroupVersionKind) error {
	if want.GroupVersion() != got.GroupVersion() {
		return apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", got.GroupVersion(), want.GroupVersion()))
	}
	return apierrors.NewBadRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (%s)", got.Kind, want.Kind))
}

// warn adds Warning headers in the upstream format.
func warn(w http.ResponseWriter, warnings []string) {
	for _, msg := range warnings {
		w.Header().Add("Warning", fmt.Sprintf("299 - %q", msg))
	}
}
