package kubelet

import (
	"os"

	"k8s.io/apimachinery/pkg/api/resource"
)

type resourceQuantity = resource.Quantity

func parseQ(s string) resource.Quantity { return resource.MustParse(s) }

func osWriteFile(path, data string) error { return os.WriteFile(path, []byte(data), 0o644) }
