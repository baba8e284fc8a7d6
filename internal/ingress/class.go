package ingress

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ControllerName is the spec.controller of the IngressClasses this
// controller serves.
const ControllerName = "kubette.io/ingress-nginx"

// DefaultClassName is the IngressClass EnsureClass creates.
const DefaultClassName = "nginx"

// legacyClassAnnotation is the deprecated class annotation upstream still
// honours for Ingresses without spec.ingressClassName.
const legacyClassAnnotation = "kubernetes.io/ingress.class"

// classSet is what the IngressClasses say about which Ingresses are ours.
type classSet struct {
	ours         map[string]bool
	defaultIsOur bool
}

func newClassSet(classes []*networkingv1.IngressClass) classSet {
	s := classSet{ours: map[string]bool{}}
	for _, c := range classes {
		if c.Spec.Controller != ControllerName {
			continue
		}
		s.ours[c.Name] = true
		if c.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true" {
			s.defaultIsOur = true
		}
	}
	return s
}

// serves reports whether the Ingress belongs to one of our classes: by
// spec.ingressClassName, else by the legacy annotation, else when one of our
// classes is the cluster's default.
func (s classSet) serves(ing *networkingv1.Ingress) bool {
	if n := ing.Spec.IngressClassName; n != nil {
		return s.ours[*n]
	}
	if n, ok := ing.Annotations[legacyClassAnnotation]; ok {
		return s.ours[n]
	}
	return s.defaultIsOur
}

// EnsureClass creates the IngressClass Options.ClassName for this
// controller, marked as the cluster's default when Options.DefaultClass is
// set. An existing class is left as it is.
func (c *Controller) EnsureClass(ctx context.Context) error {
	ic := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: c.o.ClassName},
		Spec:       networkingv1.IngressClassSpec{Controller: ControllerName},
	}
	if c.o.DefaultClass {
		ic.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}
	}
	_, err := c.o.Client.NetworkingV1().IngressClasses().Create(ctx, ic, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create IngressClass %s: %w", c.o.ClassName, err)
	}
	return nil
}
