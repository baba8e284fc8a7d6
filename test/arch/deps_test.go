// Package arch checks the dependency rules of DESIGN.md by reading the import graph.
package arch

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/kubette/kubette/"

// components reach each other only through the API, never by import.
var components = []string{
	"internal/controller", "internal/scheduler", "internal/kubelet", "internal/proxy",
	"internal/ingress", "internal/dns", "internal/sim",
}

func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "../../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := strings.TrimPrefix(fields[0], module), fields[1:]
		for _, imp := range imports {
			if (strings.HasPrefix(imp, "k8s.io/kubernetes") || strings.HasPrefix(imp, "k8s.io/apiserver")) && !contractLibrary(imp) && !celInterface(pkg, imp) {
				t.Errorf("%s imports %s: the server side is this project's own work", pkg, imp)
			}
			if strings.Contains(imp, "opencontainers/runc/libcontainer") {
				t.Errorf("%s imports %s: drive runc as a binary", pkg, imp)
			}
			local := strings.TrimPrefix(imp, module)
			if local == imp {
				continue
			}
			if within(pkg, "internal/apiserver") && within(local, "internal/storage/etcd") {
				t.Errorf("%s imports %s: the API server uses only the storage interface", pkg, local)
			}
			if within(pkg, "internal/kubelet") && within(local, "internal/runtime") {
				t.Errorf("%s imports %s: the kubelet reaches the runtime only over CRI", pkg, local)
			}
			for _, a := range components {
				for _, b := range components {
					if a != b && within(pkg, a) && within(local, b) {
						t.Errorf("%s imports %s: components talk only through the API server", pkg, local)
					}
				}
			}
		}
	}
}

// contractLibrary reports the parts of k8s.io/apiserver that DESIGN.md names as
// libraries whose behaviour is the contract (CEL environments and libraries).
func contractLibrary(imp string) bool {
	return within(imp, "k8s.io/apiserver/pkg/cel")
}

// celInterface reports the few k8s.io/apiserver packages that the CEL libraries take
// in their signatures, which only internal/admissioncel may import: the authorizer and
// user interfaces of the CEL authorizer library (its adapters put the server's own
// authorizer behind them) and the CEL cost limits.
func celInterface(pkg, imp string) bool {
	if pkg != "internal/admissioncel" {
		return false
	}
	switch imp {
	case "k8s.io/apiserver/pkg/authorization/authorizer", "k8s.io/apiserver/pkg/authentication/user", "k8s.io/apiserver/pkg/apis/cel":
		return true
	}
	return false
}

func within(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }
