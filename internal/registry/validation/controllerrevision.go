package validation

import (
	"bytes"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The apps/v1 ControllerRevision rules of upstream's pkg/apis/apps/validation: a
// DNS-subdomain name, a non-negative revision and data that is a JSON object, which
// never changes after the create.

func validateControllerRevisionCommon(rev *appsv1.ControllerRevision) field.ErrorList {
	return validateNonnegative(rev.Revision, field.NewPath("revision"))
}

func validateControllerRevisionCreate(rev *appsv1.ControllerRevision) field.ErrorList {
	errs := validateMeta(&rev.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	errs = append(errs, validateControllerRevisionCommon(rev)...)
	dataPath := field.NewPath("data")
	var v any
	switch {
	case rev.Data.Raw == nil:
		errs = append(errs, field.Required(dataPath, "data is mandatory"))
	default:
		if err := json.Unmarshal(rev.Data.Raw, &v); err != nil {
			return append(errs, field.Invalid(dataPath, "<value omitted>", fmt.Sprintf("error parsing data: %v", err)))
		}
		if v == nil {
			return append(errs, field.Required(dataPath, "data is mandatory"))
		}
		if _, ok := v.(map[string]any); !ok {
			errs = append(errs, field.Required(dataPath, "data must be a valid JSON object"))
		}
	}
	return errs
}

func validateControllerRevisionUpdate(rev, old *appsv1.ControllerRevision) field.ErrorList {
	errs := validateMetaUpdate(&rev.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateControllerRevisionCommon(rev)...)
	if !sameJSON(rev.Data.Raw, old.Data.Raw) {
		errs = append(errs, field.Invalid(field.NewPath("data"), rev.Data, fieldImmutableErrorMsg))
	}
	return errs
}

// sameJSON reports whether two JSON documents are the same bytes once compacted (the
// server stores data compacted; a client may send it indented).
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
