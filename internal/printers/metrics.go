package printers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// metricsColumns are metrics-server's: Name, one column per resource (cpu, memory),
// and the window of the CPU rate. metrics-server makes the resource columns from the
// first object (none for an empty list); kubette's usage always has both.
func metricsColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "Name of the resource"},
		{Name: string(corev1.ResourceCPU), Type: "string", Format: "quantity"},
		{Name: string(corev1.ResourceMemory), Type: "string", Format: "quantity"},
		{Name: "Window", Type: "string", Format: "duration"},
	}
}

// nodeMetricsPrinter prints NodeMetrics as metrics-server: NAME CPU MEMORY WINDOW.
func nodeMetricsPrinter() Printer {
	return Printer{
		Columns: metricsColumns(),
		Row: rowFor(func(m *metricsv1beta1.NodeMetrics, _ time.Time) []interface{} {
			return metricsRow(m.Name, m.Usage, m.Window.Duration)
		}),
	}
}

// podMetricsPrinter prints PodMetrics as metrics-server: the sums of the containers'
// usage.
func podMetricsPrinter() Printer {
	return Printer{
		Columns: metricsColumns(),
		Row: rowFor(func(m *metricsv1beta1.PodMetrics, _ time.Time) []interface{} {
			sum := corev1.ResourceList{}
			for _, c := range m.Containers {
				for k, v := range c.Usage {
					q := sum[k]
					q.Add(v)
					sum[k] = q
				}
			}
			return metricsRow(m.Name, sum, m.Window.Duration)
		}),
	}
}

func metricsRow(name string, usage corev1.ResourceList, window time.Duration) []interface{} {
	cpu, mem := usage[corev1.ResourceCPU], usage[corev1.ResourceMemory]
	return []interface{}{name, cpu.String(), mem.String(), window.String()}
}
