package podautoscaler

import (
	"fmt"
	"testing"
)

// BenchmarkSync is one sync of an autoscaler whose target has 1000 pods at the target
// utilization (no rescale, no status write after the first): the listers, the
// replica calculation and the conditions.
func BenchmarkSync(b *testing.B) {
	f := newFixture(b, hpaFor("web", 1, 2000))
	f.target(1000)
	usage := map[string]int64{}
	for i := range 1000 {
		name := fmt.Sprintf("web-%d", i)
		f.pods(pod(name, 1000))
		usage[name] = 500
	}
	f.usage(usage)
	b.ResetTimer()
	for range b.N {
		if err := f.sync("web"); err != nil {
			b.Fatal(err)
		}
	}
}
