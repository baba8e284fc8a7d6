package bootstrap

import (
	"context"
	"fmt"
	"strconv"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
)

// FieldManager is the field manager of the writes Ensure makes, as upstream's.
const FieldManager = "api-priority-and-fairness-config-producer-v1"

// object is what Ensure needs of both kinds.
type object interface {
	metav1.Object
	*flowcontrolv1.FlowSchema | *flowcontrolv1.PriorityLevelConfiguration
}

// ops are one kind's client calls and spec handling.
type ops[T object] struct {
	get    func(ctx context.Context, name string) (T, error)
	list   func(ctx context.Context) ([]T, error)
	create func(ctx context.Context, obj T) error
	update func(ctx context.Context, obj T) error
	delete func(ctx context.Context, name string) error
	// withSpec returns a copy of current with the spec of want.
	withSpec  func(current, want T) T
	copy      func(T) T
	specEqual func(a, b T) bool
}

// Ensure brings the cluster's APF configuration to upstream's bootstrap state once:
// missing suggested and mandatory objects are created; a mandatory object's spec is
// always restored; a suggested object's spec is restored only while its
// apf.kubernetes.io/autoupdate-spec annotation is true (or, without the annotation,
// while it is at generation 1), and the annotation is set to what was decided;
// objects no longer in the bootstrap set that carry the annotation true are deleted.
func Ensure(ctx context.Context, client flowcontrolclient.FlowcontrolV1Interface) error {
	pls := levelOps(client.PriorityLevelConfigurations())
	fss := schemaOps(client.FlowSchemas())
	if err := ensureAll(ctx, pls, SuggestedPriorityLevelConfigurations(), false); err != nil {
		return fmt.Errorf("ensure suggested priority levels: %w", err)
	}
	if err := ensureAll(ctx, fss, SuggestedFlowSchemas(), false); err != nil {
		return fmt.Errorf("ensure suggested flow schemas: %w", err)
	}
	if err := ensureAll(ctx, pls, MandatoryPriorityLevelConfigurations(), true); err != nil {
		return fmt.Errorf("ensure mandatory priority levels: %w", err)
	}
	if err := ensureAll(ctx, fss, MandatoryFlowSchemas(), true); err != nil {
		return fmt.Errorf("ensure mandatory flow schemas: %w", err)
	}
	if err := removeUnwanted(ctx, fss, append(MandatoryFlowSchemas(), SuggestedFlowSchemas()...)); err != nil {
		return fmt.Errorf("remove unwanted flow schemas: %w", err)
	}
	if err := removeUnwanted(ctx, pls, append(MandatoryPriorityLevelConfigurations(), SuggestedPriorityLevelConfigurations()...)); err != nil {
		return fmt.Errorf("remove unwanted priority levels: %w", err)
	}
	return nil
}

func ensureAll[T object](ctx context.Context, o ops[T], want []T, mandatory bool) error {
	for _, w := range want {
		if err := ensureOne(ctx, o, w, mandatory); err != nil {
			return err
		}
	}
	return nil
}

func ensureOne[T object](ctx context.Context, o ops[T], want T, mandatory bool) error {
	name := want.GetName()
	current, err := o.get(ctx, name)
	if apierrors.IsNotFound(err) {
		err = o.create(ctx, o.copy(want))
		if err == nil || !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return fmt.Errorf("create %s: %w", name, err)
			}
			return nil
		}
		// Another API server created it first: check it as it is.
		current, err = o.get(ctx, name)
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", name, err)
	}
	auto := mandatory || autoUpdate(current)
	annotate := !annotated(current, auto)
	respec := auto && !o.specEqual(want, current)
	if !annotate && !respec {
		return nil
	}
	revised := o.copy(current)
	if respec {
		revised = o.withSpec(current, want)
	}
	if annotate {
		a := revised.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[flowcontrolv1.AutoUpdateAnnotationKey] = strconv.FormatBool(auto)
		revised.SetAnnotations(a)
	}
	if err := o.update(ctx, revised); err != nil && !apierrors.IsConflict(err) {
		// A conflict means someone changed it meanwhile: the next round looks again.
		return fmt.Errorf("update %s: %w", name, err)
	}
	return nil
}

// autoUpdate is a suggested object's choice: the annotation when it parses, else
// whether nobody changed the spec since its creation.
func autoUpdate(obj metav1.Object) bool {
	if v, err := strconv.ParseBool(obj.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]); err == nil {
		return v
	}
	return obj.GetGeneration() == 1
}

// annotated reports whether the annotation already says want.
func annotated(obj metav1.Object, want bool) bool {
	v, ok := obj.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err == nil && b == want
}

func removeUnwanted[T object](ctx context.Context, o ops[T], wanted []T) error {
	names := map[string]bool{}
	for _, w := range wanted {
		names[w.GetName()] = true
	}
	current, err := o.list(ctx)
	if err != nil {
		return err
	}
	for _, c := range current {
		if names[c.GetName()] {
			continue
		}
		v, ok := c.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]
		if b, err := strconv.ParseBool(v); !ok || err != nil || !b {
			continue
		}
		if err := o.delete(ctx, c.GetName()); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s: %w", c.GetName(), err)
		}
	}
	return nil
}

// typedClient is the part of client-go's typed clients ops needs, the same for both kinds.
type typedClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// clientOps builds the ops of a kind from its typed client and what differs by kind.
func clientOps[T object](c typedClient[T], list func(ctx context.Context) ([]T, error), withSpec func(current, want T) T,
	copyOf func(T) T, specEqual func(a, b T) bool) ops[T] {
	return ops[T]{
		get:  func(ctx context.Context, name string) (T, error) { return c.Get(ctx, name, metav1.GetOptions{}) },
		list: list,
		create: func(ctx context.Context, obj T) error {
			_, err := c.Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager})
			return err
		},
		update: func(ctx context.Context, obj T) error {
			_, err := c.Update(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager})
			return err
		},
		delete:    func(ctx context.Context, name string) error { return c.Delete(ctx, name, metav1.DeleteOptions{}) },
		withSpec:  withSpec,
		copy:      copyOf,
		specEqual: specEqual,
	}
}

// pointers returns pointers to the items of a list.
func pointers[E any](items []E) []*E {
	out := make([]*E, 0, len(items))
	for i := range items {
		out = append(out, &items[i])
	}
	return out
}

func levelOps(c flowcontrolclient.PriorityLevelConfigurationInterface) ops[*flowcontrolv1.PriorityLevelConfiguration] {
	type T = *flowcontrolv1.PriorityLevelConfiguration
	return clientOps[T](c,
		func(ctx context.Context) ([]T, error) {
			l, err := c.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return pointers(l.Items), nil
		},
		func(current, want T) T {
			out := current.DeepCopy()
			want.Spec.DeepCopyInto(&out.Spec)
			return out
		},
		func(o T) T { return o.DeepCopy() },
		func(a, b T) bool { return apiequality.Semantic.DeepEqual(a.Spec, b.Spec) })
}

func schemaOps(c flowcontrolclient.FlowSchemaInterface) ops[*flowcontrolv1.FlowSchema] {
	type T = *flowcontrolv1.FlowSchema
	return clientOps[T](c,
		func(ctx context.Context) ([]T, error) {
			l, err := c.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return pointers(l.Items), nil
		},
		func(current, want T) T {
			out := current.DeepCopy()
			want.Spec.DeepCopyInto(&out.Spec)
			return out
		},
		func(o T) T { return o.DeepCopy() },
		func(a, b T) bool { return apiequality.Semantic.DeepEqual(a.Spec, b.Spec) })
}
