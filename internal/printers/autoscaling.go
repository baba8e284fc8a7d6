package printers

import (
	"fmt"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubette/kubette/internal/registry/conversion"
)

// hpaPrinter prints HorizontalPodAutoscalers of either version: NAME REFERENCE TARGETS
// MINPODS MAXPODS REPLICAS AGE, as upstream 1.32 (which prints its internal form, so an
// autoscaling/v1 object shows the metrics its annotations keep).
func hpaPrinter() Printer {
	spec := autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Reference", "string", 0, spec["scaleTargetRef"]),
			column("Targets", "string", 0, spec["metrics"]),
			column("MinPods", "string", 0, spec["minReplicas"]),
			column("MaxPods", "string", 0, spec["maxReplicas"]),
			column("Replicas", "string", 0, autoscalingv2.HorizontalPodAutoscalerStatus{}.SwaggerDoc()["currentReplicas"]),
			ageColumn(),
		},
		Row: func(obj runtime.Object, now time.Time) ([]interface{}, error) {
			h, err := hpaV2(obj)
			if err != nil {
				return nil, err
			}
			minPods := "<unset>"
			if h.Spec.MinReplicas != nil {
				minPods = fmt.Sprint(*h.Spec.MinReplicas)
			}
			return []interface{}{h.Name, h.Spec.ScaleTargetRef.Kind + "/" + h.Spec.ScaleTargetRef.Name,
				hpaTargets(h.Spec.Metrics, h.Status.CurrentMetrics), minPods, int64(h.Spec.MaxReplicas),
				int64(h.Status.CurrentReplicas), translateTimestampSince(h.CreationTimestamp, now)}, nil
		},
	}
}

// hpaV2 returns obj as an autoscaling/v2 autoscaler, converting an autoscaling/v1 one.
func hpaV2(obj runtime.Object) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Version == "v1" {
		if _, ok := obj.(runtime.Unstructured); ok {
			v1, err := asType[autoscalingv1.HorizontalPodAutoscaler](obj)
			if err != nil {
				return nil, err
			}
			obj = v1
		}
	}
	if v1, ok := obj.(*autoscalingv1.HorizontalPodAutoscaler); ok {
		h, err := conversion.HPAFromV1(v1)
		if err != nil {
			return nil, fmt.Errorf("printers: %w", err)
		}
		return h, nil
	}
	return asType[autoscalingv2.HorizontalPodAutoscaler](obj)
}

// hpaTargets is the TARGETS cell: "current/target" of the first two metrics, then
// "+ N more...", with "<unknown>" for a metric with no current value yet.
func hpaTargets(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	const shown = 2
	var cells []string
	for i, s := range specs {
		var st *autoscalingv2.MetricStatus
		if i < len(statuses) {
			st = &statuses[i]
		}
		cells = append(cells, hpaTarget(s, st))
	}
	if len(cells) <= shown {
		return strings.Join(cells, ", ")
	}
	return fmt.Sprintf("%s + %d more...", strings.Join(cells[:shown], ", "), len(cells)-shown)
}

// hpaTarget formats one metric against its status (nil when there is none).
func hpaTarget(s autoscalingv2.MetricSpec, st *autoscalingv2.MetricStatus) string {
	const unknown = "<unknown>"
	// valueOrAverage formats a target that is either a total value or a per-pod average
	// (marked "(avg)"), against the matching current value.
	valueOrAverage := func(t autoscalingv2.MetricTarget, cur *autoscalingv2.MetricValueStatus) string {
		if t.AverageValue != nil {
			c := unknown
			if cur != nil && cur.AverageValue != nil {
				c = cur.AverageValue.String()
			}
			return c + "/" + t.AverageValue.String() + " (avg)"
		}
		c := unknown
		if cur != nil && cur.Value != nil {
			c = cur.Value.String()
		}
		target := "<nil>"
		if t.Value != nil {
			target = t.Value.String()
		}
		return c + "/" + target
	}
	// resource formats a resource metric: an average value, or a utilization.
	resource := func(name string, t autoscalingv2.MetricTarget, cur *autoscalingv2.MetricValueStatus) string {
		if t.AverageValue != nil {
			c := unknown
			if cur != nil && cur.AverageValue != nil {
				c = cur.AverageValue.String()
			}
			return fmt.Sprintf("%s: %s/%s", name, c, t.AverageValue.String())
		}
		c, target := unknown, "<auto>"
		if cur != nil && cur.AverageUtilization != nil {
			c = fmt.Sprintf("%d%%", *cur.AverageUtilization)
		}
		if t.AverageUtilization != nil {
			target = fmt.Sprintf("%d%%", *t.AverageUtilization)
		}
		return fmt.Sprintf("%s: %s/%s", name, c, target)
	}
	switch {
	case s.Type == autoscalingv2.ExternalMetricSourceType && s.External != nil:
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.External != nil {
			cur = &st.External.Current
		}
		return valueOrAverage(s.External.Target, cur)
	case s.Type == autoscalingv2.ObjectMetricSourceType && s.Object != nil:
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.Object != nil {
			cur = &st.Object.Current
		}
		return valueOrAverage(s.Object.Target, cur)
	case s.Type == autoscalingv2.PodsMetricSourceType && s.Pods != nil:
		c, target := unknown, "<nil>"
		if st != nil && st.Pods != nil && st.Pods.Current.AverageValue != nil {
			c = st.Pods.Current.AverageValue.String()
		}
		if s.Pods.Target.AverageValue != nil {
			target = s.Pods.Target.AverageValue.String()
		}
		return c + "/" + target
	case s.Type == autoscalingv2.ResourceMetricSourceType && s.Resource != nil:
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.Resource != nil {
			cur = &st.Resource.Current
		}
		return resource(string(s.Resource.Name), s.Resource.Target, cur)
	case s.Type == autoscalingv2.ContainerResourceMetricSourceType && s.ContainerResource != nil:
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.ContainerResource != nil {
			cur = &st.ContainerResource.Current
		}
		return resource(string(s.ContainerResource.Name), s.ContainerResource.Target, cur)
	}
	return "<unknown type>"
}
