package apiserver

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// protoPrefix starts every protobuf-encoded object: "k8s" and a zero byte.
var protoPrefix = [4]byte{0x6b, 0x38, 0x73, 0x00}

// protoUnmarshaler is what the generated types of every built-in kind implement.
type protoUnmarshaler interface {
	Reset()
	Unmarshal([]byte) error
}

// decodeStored decodes a stored object (protobuf with the kind envelope) into a new
// object of its kind, as the protobuf serializer's Decode does without a target, but
// without copying the envelope's raw bytes first: the object is unmarshalled straight
// from value (the generated Unmarshal copies every string and byte slice it keeps).
func decodeStored(scheme *runtime.Scheme, value []byte) (runtime.Object, error) {
	if len(value) <= len(protoPrefix) || !bytes.Equal(value[:len(protoPrefix)], protoPrefix[:]) {
		return nil, errors.New("not a protobuf-encoded object")
	}
	var apiVersion, kind string
	var raw []byte
	b := value[len(protoPrefix):]
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("envelope: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil, fmt.Errorf("envelope: %w", protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, fmt.Errorf("envelope: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch num {
		case 1: // typeMeta
			var err error
			if apiVersion, kind, err = decodeTypeMeta(v); err != nil {
				return nil, err
			}
		case 2: // raw
			raw = v
		}
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, fmt.Errorf("envelope: %w", err)
	}
	if kind == "" || gv.Version == "" {
		return nil, fmt.Errorf("envelope: no kind or version in %q %q", apiVersion, kind)
	}
	gvk := gv.WithKind(kind)
	obj, err := scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	u, ok := obj.(protoUnmarshaler)
	if !ok {
		return nil, fmt.Errorf("%s cannot be decoded from protobuf", gvk)
	}
	u.Reset()
	if err := u.Unmarshal(raw); err != nil {
		return nil, fmt.Errorf("decode %s: %w", gvk, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

// decodeTypeMeta reads the envelope's apiVersion (field 1) and kind (field 2).
func decodeTypeMeta(b []byte) (apiVersion, kind string, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", "", fmt.Errorf("envelope type: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return "", "", fmt.Errorf("envelope type: %w", protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return "", "", fmt.Errorf("envelope type: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch num {
		case 1:
			apiVersion = string(v)
		case 2:
			kind = string(v)
		}
	}
	return apiVersion, kind, nil
}
