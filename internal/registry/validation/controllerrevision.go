package validation

import (
	"bytes"
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The apps/v1 ControllerRevision rules of upstream's pkg/apis/apps/validation: a
// DNS-subdomain name, a non-negative revision and data, which never changes after the
// create.

func validateControllerRevisionCommon(rev *appsv1.ControllerRevision) field.ErrorList {
	return validateNonnegative(rev.Revision, field.NewPath("revision"))
}

func validateControllerRevisionCreate(rev *appsv1.ControllerRevision) field.ErrorList {
	errs := validateMeta(&rev.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	if raw := bytes.TrimSpace(rev.Data.Raw); len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		errs = append(errs, field.Required(field.NewPath("data"), "data is mandatory"))
	}
	return append(errs, validateControllerRevisionCommon(rev)...)
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
