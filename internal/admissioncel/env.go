package admissioncel

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"

	"k8s.io/apimachinery/pkg/util/version"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

// envKey names one combination of optional variables.
type envKey struct{ params, authorizer bool }

// baseEnvs are the environments without variables, one per combination of optional
// variables, built once on first use (building one takes milliseconds) and never
// changed after.
var baseEnvs = sync.OnceValues(func() (map[envKey]*environment.EnvSet, error) {
	out := map[envKey]*environment.EnvSet{}
	for _, k := range []envKey{{false, false}, {false, true}, {true, false}, {true, true}} {
		e, err := withOptional(baseEnvSet(), k)
		if err != nil {
			return nil, err
		}
		out[k] = e
	}
	return out, nil
})

// baseEnvSet is upstream's base environment at the compatibility version.
func baseEnvSet() *environment.EnvSet {
	return environment.MustBaseEnvSet(version.MajorMinor(compatibilityMajor, compatibilityMinor))
}

// withOptional declares the admission variables in base: object, oldObject, request
// and namespaceObject always, params and the authorizers when k says so.
func withOptional(base *environment.EnvSet, k envKey) (*environment.EnvSet, error) {
	request, namespace := requestType(), namespaceType()
	opts := []cel.EnvOption{
		cel.Variable(ObjectVar, cel.DynType),
		cel.Variable(OldObjectVar, cel.DynType),
		cel.Variable(NamespaceVar, namespace.CelType()),
		cel.Variable(RequestVar, request.CelType()),
	}
	if k.params {
		opts = append(opts, cel.Variable(ParamsVar, cel.DynType))
	}
	if k.authorizer {
		opts = append(opts,
			cel.Variable(AuthorizerVar, library.AuthorizerType),
			cel.Variable(RequestResourceAuthorizerVar, library.ResourceCheckType))
	}
	e, err := base.Extend(environment.VersionedOptions{
		// Always present, whatever the compatibility version.
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        opts,
		DeclTypes:         []*apiservercel.DeclType{namespace, request},
	}, environment.StrictCostOpt)
	if err != nil {
		return nil, fmt.Errorf("admission CEL environment: %w", err)
	}
	return e, nil
}

// Object types of the request and namespaceObject variables, as upstream declares
// them: an admission.k8s.io/v1 AdmissionRequest without uid, object and oldObject (the
// objects are variables of their own), and a Namespace without managedFields and
// ownerReferences.

func declField(name string, t *apiservercel.DeclType, required bool) *apiservercel.DeclField {
	return apiservercel.NewDeclField(name, t, required, nil, nil)
}

func declFields(fs ...*apiservercel.DeclField) map[string]*apiservercel.DeclField {
	out := make(map[string]*apiservercel.DeclField, len(fs))
	for _, f := range fs {
		out[f.Name] = f
	}
	return out
}

func requestType() *apiservercel.DeclType {
	str := apiservercel.StringType
	gvk := apiservercel.NewObjectType("kubernetes.GroupVersionKind", declFields(
		declField("group", str, true), declField("version", str, true), declField("kind", str, true)))
	gvr := apiservercel.NewObjectType("kubernetes.GroupVersionResource", declFields(
		declField("group", str, true), declField("version", str, true), declField("resource", str, true)))
	strings := apiservercel.NewListType(str, -1)
	user := apiservercel.NewObjectType("kubernetes.UserInfo", declFields(
		declField("username", str, false), declField("uid", str, false),
		declField("groups", strings, false),
		declField("extra", apiservercel.NewMapType(str, strings, -1), false)))
	return apiservercel.NewObjectType("kubernetes.AdmissionRequest", declFields(
		declField("kind", gvk, true), declField("resource", gvr, true), declField("subResource", str, false),
		declField("requestKind", gvk, true), declField("requestResource", gvr, true), declField("requestSubResource", str, false),
		declField("name", str, true), declField("namespace", str, false), declField("operation", str, true),
		declField("userInfo", user, true), declField("dryRun", apiservercel.BoolType, false),
		declField("options", apiservercel.DynType, false)))
}

func namespaceType() *apiservercel.DeclType {
	str, strings := apiservercel.StringType, apiservercel.NewListType(apiservercel.StringType, -1)
	labels := apiservercel.NewMapType(str, str, -1)
	condition := apiservercel.NewObjectType("kubernetes.NamespaceCondition", declFields(
		declField("status", str, true), declField("type", str, true),
		declField("lastTransitionTime", apiservercel.TimestampType, true),
		declField("message", str, true), declField("reason", str, true)))
	return apiservercel.NewObjectType("kubernetes.Namespace", declFields(
		declField("metadata", apiservercel.NewObjectType("kubernetes.NamespaceMetadata", declFields(
			declField("name", str, true), declField("generateName", str, true), declField("namespace", str, true),
			declField("labels", labels, true), declField("annotations", labels, true), declField("UID", str, true),
			declField("creationTimestamp", apiservercel.TimestampType, true),
			declField("deletionGracePeriodSeconds", apiservercel.IntType, true),
			declField("deletionTimestamp", apiservercel.TimestampType, true),
			declField("generation", apiservercel.IntType, true), declField("resourceVersion", str, true),
			declField("finalizers", strings, true))), true),
		declField("spec", apiservercel.NewObjectType("kubernetes.NamespaceSpec", declFields(
			declField("finalizers", strings, true))), true),
		declField("status", apiservercel.NewObjectType("kubernetes.NamespaceStatus", declFields(
			declField("conditions", apiservercel.NewListType(condition, -1), true),
			declField("phase", str, true))), true)))
}
