package printers

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

func TestMetricsPrinters(t *testing.T) {
	usage := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	np := mustFor(t, schema.GroupResource{Group: "metrics.k8s.io", Resource: "nodes"})
	if got := columnNames(np); got != "NAME CPU MEMORY WINDOW" {
		t.Errorf("columns = %s", got)
	}
	got := cells(t, np, &metricsv1beta1.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Window: metav1.Duration{Duration: 15 * time.Second}, Usage: usage("250m", "1Gi")})
	if want := []interface{}{"n1", "250m", "1Gi", "15s"}; !reflect.DeepEqual(got, want) {
		t.Errorf("node row = %v, want %v", got, want)
	}
	pp := mustFor(t, schema.GroupResource{Group: "metrics.k8s.io", Resource: "pods"})
	got = cells(t, pp, &metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Window: metav1.Duration{Duration: 14500 * time.Millisecond}, Containers: []metricsv1beta1.ContainerMetrics{
			{Name: "a", Usage: usage("100m", "10Mi")}, {Name: "b", Usage: usage("50m", "6Mi")}}})
	if want := []interface{}{"web", "150m", "16Mi", "14.5s"}; !reflect.DeepEqual(got, want) {
		t.Errorf("pod row = %v, want %v", got, want)
	}
}
