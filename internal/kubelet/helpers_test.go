package kubelet

import "k8s.io/apimachinery/pkg/api/resource"

type resourceQuantity = resource.Quantity

func parseQ(s string) resource.Quantity { return resource.MustParse(s) }
