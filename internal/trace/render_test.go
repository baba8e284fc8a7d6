package trace

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	goldenfile "github.com/kubette/kubette/internal/testenv/golden"
)

func loadInput(t *testing.T, name string) Input {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var in Input
	if err := json.Unmarshal(data, &in); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return in
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name), []byte(got))
}

// goldenFixtures are the recorded flows in testdata: deployment.json, written by hand to
// cover every kind of step; recorded.json, a 3-replica Deployment's flow recorded by the
// integration test (TRACE_RECORD_FIXTURE) on a control plane with a simulated node; and
// node-*.json, flows recorded by the e2e test on a real node (KUBETTE_TRACE_FIXTURES):
// a Deployment, a Service and an Ingress.
var goldenFixtures = []string{"deployment", "recorded", "node-deployment", "node-service", "node-ingress"}

// TestGolden renders every fixture in goldenFixtures.
func TestGolden(t *testing.T) {
	for _, fixture := range goldenFixtures {
		in := Normalize(loadInput(t, fixture+".json"))
		for _, all := range []bool{false, true} {
			name := fixture
			if all {
				name += ".all"
			}
			f := Build(in, Options{All: all})
			m := Mermaid(f)
			if err := CheckMermaid(m); err != nil {
				t.Errorf("%s.mmd: %v", name, err)
			}
			golden(t, name+".mmd", m)
			golden(t, name+".txt", Text(f))
			golden(t, name+".svg", SVG(f))
		}
	}
}
