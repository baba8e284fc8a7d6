package apiserver

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"sigs.k8s.io/yaml"
)

const (
	mimeJSON     = "application/json"
	mimeYAML     = "application/yaml"
	mimeProtobuf = "application/vnd.kubernetes.protobuf"
)

// mediaType is one acceptable response type from an Accept header.
type mediaType struct {
	// typ is json, yaml or protobuf.
	typ string
	// as is "", "Table", "PartialObjectMetadata" or "PartialObjectMetadataList".
	as string
}

// parseAccept returns the acceptable response types in the client's order. An
// empty header accepts JSON.
func parseAccept(header string) []mediaType {
	if strings.TrimSpace(header) == "" {
		return []mediaType{{typ: "json"}}
	}
	var out []mediaType
	for _, part := range strings.Split(header, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		var m mediaType
		switch mt {
		case mimeJSON, "application/*", "*/*", "application/json-patch+json":
			m.typ = "json"
		case mimeYAML, "application/x-yaml", "text/yaml":
			m.typ = "yaml"
		case mimeProtobuf:
			m.typ = "protobuf"
		default:
			continue
		}
		if as := params["as"]; as != "" {
			if params["g"] != "meta.k8s.io" || (params["v"] != "v1" && params["v"] != "v1beta1") {
				continue
			}
			switch as {
			case "Table", "PartialObjectMetadata", "PartialObjectMetadataList":
				m.as = as
			default:
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

// codecs holds the serializers of one server.
type codecs struct {
	proto *protobuf.Serializer
	raw   *protobuf.RawSerializer
}

func newCodecs(s *runtime.Scheme) *codecs {
	return &codecs{proto: protobuf.NewSerializer(s, s), raw: protobuf.NewRawSerializer(s, s)}
}

// encode writes obj in the media type (obj must carry its apiVersion and kind).
func (c *codecs) encode(w io.Writer, typ string, obj runtime.Object) error {
	switch typ {
	case "protobuf":
		return c.proto.Encode(obj, w)
	case "yaml":
		data, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	default:
		return json.NewEncoder(w).Encode(obj)
	}
}

// protoBytes returns obj's protobuf encoding (the kind envelope and the object) in a
// slice of its own, allocated once: the serializer sizes the message and writes it
// with a single Write, which keeps the slice instead of copying it into a buffer.
func (c *codecs) protoBytes(obj runtime.Object) ([]byte, error) {
	var w captureWriter
	if err := c.proto.EncodeWithAllocator(obj, &w, &runtime.SimpleAllocator{}); err != nil {
		return nil, err
	}
	return w.data, nil
}

// captureWriter keeps the slice of a single Write without copying it (the allocator
// that made it is not used again); further writes append to it.
type captureWriter struct {
	data   []byte
	writes int
}

// Write keeps p on the first call and appends it afterwards.
func (w *captureWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.writes == 1 {
		w.data = p
	} else {
		w.data = append(w.data[:len(w.data):len(w.data)], p...)
	}
	return len(p), nil
}

func contentType(typ string) string {
	switch typ {
	case "protobuf":
		return mimeProtobuf
	case "yaml":
		return mimeYAML
	}
	return mimeJSON
}

// protobufCapable reports whether obj can be sent as protobuf.
func protobufCapable(obj runtime.Object) bool {
	switch obj.(type) {
	case *metav1.Table:
		return false
	}
	_, ok := obj.(interface{ Marshal() ([]byte, error) })
	return ok
}

// writeObject encodes obj for the first acceptable media type that can carry it.
func (s *Server) writeObject(w http.ResponseWriter, r *http.Request, code int, obj runtime.Object) {
	typ := responseType(r, obj)
	data, err := s.codecs.encodeBytes(typ, obj)
	if err != nil {
		s.writeError(w, r, apierrors.NewInternalError(fmt.Errorf("encode response: %w", err)))
		return
	}
	w.Header().Set("Content-Type", contentType(typ))
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

// responseType is the media type ("json", "yaml" or "protobuf") of a response of obj
// that the request accepts: the first it names that can carry obj, JSON otherwise.
func responseType(r *http.Request, obj runtime.Object) string {
	for _, m := range parseAccept(r.Header.Get("Accept")) {
		if m.as != "" {
			continue
		}
		if m.typ == "protobuf" && !protobufCapable(obj) {
			continue
		}
		return m.typ
	}
	return "json"
}

// encodeBytes returns obj encoded in the media type typ.
func (c *codecs) encodeBytes(typ string, obj runtime.Object) ([]byte, error) {
	if typ == "protobuf" {
		return c.protoBytes(obj)
	}
	var buf bytes.Buffer
	if err := c.encode(&buf, typ, obj); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// constResponse is a response object that never changes (a binding's Success Status),
// encoded once in each media type when the server starts.
type constResponse struct {
	obj     runtime.Object
	encoded map[string][]byte // by media type: json, yaml, protobuf
}

func (c *codecs) newConstResponse(obj runtime.Object) (*constResponse, error) {
	r := &constResponse{obj: obj, encoded: map[string][]byte{}}
	for _, typ := range []string{"json", "yaml", "protobuf"} {
		data, err := c.encodeBytes(typ, obj)
		if err != nil {
			return nil, fmt.Errorf("encode %T as %s: %w", obj, typ, err)
		}
		r.encoded[typ] = data
	}
	return r, nil
}

// writeConst writes a constResponse as writeObject would write its object.
func (s *Server) writeConst(w http.ResponseWriter, r *http.Request, code int, c *constResponse) {
	typ := responseType(r, c.obj)
	w.Header().Set("Content-Type", contentType(typ))
	w.WriteHeader(code)
	_, _ = w.Write(c.encoded[typ])
}

// writeError answers with a metav1.Status in the shape kubectl expects.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	st := errorToStatus(err)
	if st.Code == http.StatusTooManyRequests && st.Details != nil && st.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(st.Details.RetryAfterSeconds))
	}
	s.writeObject(w, r, int(st.Code), st)
}

func errorToStatus(err error) *metav1.Status {
	var st metav1.Status
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st = se.Status()
	} else {
		st = apierrors.NewInternalError(err).ErrStatus
	}
	st.APIVersion, st.Kind = "v1", "Status"
	if st.Status == "" {
		st.Status = metav1.StatusFailure
	}
	if st.Code == 0 {
		st.Code = http.StatusInternalServerError
	}
	return &st
}

// watchEncoder writes the events of one watch stream.
type watchEncoder struct {
	typ   string
	w     io.Writer
	codec *codecs
	buf   bytes.Buffer
}

// write sends one event; obj must carry its apiVersion and kind.
func (e *watchEncoder) write(eventType string, obj runtime.Object) error {
	raw, err := e.encodeObject(obj)
	if err != nil {
		return err
	}
	return e.writeRaw(eventType, raw)
}

// encodeObject serialises the object of an event in the stream's encoding: what
// watchcache.Event.Encoded shares between the watchers of one event.
func (e *watchEncoder) encodeObject(obj runtime.Object) ([]byte, error) {
	if e.typ == "protobuf" {
		return e.codec.protoBytes(obj)
	}
	return json.Marshal(obj)
}

// writeRaw sends one event whose object encodeObject serialised.
func (e *watchEncoder) writeRaw(eventType string, raw []byte) error {
	e.buf.Reset()
	switch e.typ {
	case "protobuf":
		ev := metav1.WatchEvent{Type: eventType, Object: runtime.RawExtension{Raw: raw}}
		n := ev.Size()
		e.buf.Grow(4 + n)
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(n))
		e.buf.Write(hdr[:])
		b := e.buf.AvailableBuffer()[:n]
		if _, err := ev.MarshalToSizedBuffer(b); err != nil {
			return err
		}
		e.buf.Write(b)
	default:
		// What json.Encoder writes for {"type": eventType, "object": raw}: raw is
		// already compact and HTML-escaped (json.Marshal), so it is copied as it is.
		typ, err := json.Marshal(eventType)
		if err != nil {
			return err
		}
		e.buf.WriteString(`{"type":`)
		e.buf.Write(typ)
		e.buf.WriteString(`,"object":`)
		e.buf.Write(raw)
		e.buf.WriteString("}\n")
	}
	_, err := e.w.Write(e.buf.Bytes())
	return err
}
