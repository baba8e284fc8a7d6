package ingress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubette/kubette/internal/ingress/nginx"
	goldenfile "github.com/kubette/kubette/internal/testenv/golden"
	"github.com/kubette/kubette/internal/testenv/needs"
)

// goldenPrefix stands for the data directory in golden files.
const goldenPrefix = "/PREFIX"

func loadInputs(t *testing.T, file string) Inputs {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var in Inputs
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: decode: %v", file, err)
		}
		switch o := obj.(type) {
		case *networkingv1.Ingress:
			in.Ingresses = append(in.Ingresses, o)
		case *corev1.Service:
			in.Services = append(in.Services, o)
		case *discoveryv1.EndpointSlice:
			in.Slices = append(in.Slices, o)
		case *corev1.Secret:
			in.Secrets = append(in.Secrets, o)
		default:
			t.Fatalf("%s: unexpected %T", file, obj)
		}
	}
	return in
}

// renderGolden is what a golden file holds: the problems as comments, then
// nginx.conf.
func renderGolden(m Model) []byte {
	var b bytes.Buffer
	for _, s := range m.Served {
		fmt.Fprintf(&b, "# served: %s\n", s)
	}
	for _, p := range m.Problems {
		fmt.Fprintf(&b, "# problem: %s %s: %s\n", p.Ingress, p.Reason, p.Message)
	}
	b.Write(nginx.Render(m.Config))
	return b.Bytes()
}

func goldenCases(t *testing.T) []string {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	return files
}

// goldenModules stand for the Lua module files in golden files.
var goldenLua = &nginx.Lua{Modules: []string{"/MODULES/ndk_http_module.so", "/MODULES/ngx_http_lua_module.so"}}

// luaGoldenCases are also rendered with Lua (endpoints through the
// balancer) into NAME.lua.golden.
var luaGoldenCases = []string{"hosts-paths", "no-endpoints"}

// goldenVariant is one golden file of a case.
type goldenVariant struct {
	file   string
	layout Layout
}

func goldenVariants(t *testing.T) map[string]goldenVariant {
	out := map[string]goldenVariant{}
	for _, file := range goldenCases(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		base := strings.TrimSuffix(file, ".yaml")
		out[name] = goldenVariant{file: base + ".golden", layout: Layout{Prefix: goldenPrefix, HTTPPort: 80, HTTPSPort: 443}}
		if slices.Contains(luaGoldenCases, name) {
			out[name+".lua"] = goldenVariant{file: base + ".lua.golden", layout: Layout{Prefix: goldenPrefix, HTTPPort: 80, HTTPSPort: 443, Lua: goldenLua}}
		}
	}
	return out
}

func inputsOf(t *testing.T, name string) Inputs {
	return loadInputs(t, filepath.Join("testdata", strings.TrimSuffix(name, ".lua")+".yaml"))
}

func TestGolden(t *testing.T) {
	for name, v := range goldenVariants(t) {
		t.Run(name, func(t *testing.T) {
			m := Build(v.layout, inputsOf(t, name))
			got := renderGolden(m)
			goldenfile.Check(t, v.file, got)
			// Rendering is pure: the same inputs give the same bytes.
			if again := renderGolden(Build(v.layout, inputsOf(t, name))); !bytes.Equal(again, got) {
				t.Errorf("two builds of the same inputs differ")
			}
		})
	}
}

// TestGoldenNginxAccepts runs the real `nginx -t` on every golden config,
// with the prefix and certificates made real.
func TestGoldenNginxAccepts(t *testing.T) {
	bin := needs.Binary(t, "nginx", "nginx")
	var lua *nginx.Lua
	for name, v := range goldenVariants(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			m := Build(v.layout, inputsOf(t, name))
			if err := prepareDirs(dir); err != nil {
				t.Fatal(err)
			}
			for f, pem := range m.Certs {
				f = dir + strings.TrimPrefix(f, goldenPrefix)
				if err := os.WriteFile(f, pem, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			golden, err := os.ReadFile(v.file)
			if err != nil {
				t.Fatal(err)
			}
			golden = bytes.ReplaceAll(golden, []byte(goldenPrefix), []byte(dir))
			if v.layout.Lua != nil {
				if lua == nil {
					lua = needsLua(t, bin)
				}
				for i, m := range goldenLua.Modules {
					golden = bytes.ReplaceAll(golden, []byte("load_module "+m+";"), []byte("load_module "+lua.Modules[min(i, len(lua.Modules)-1)]+";"))
				}
			}
			conf := filepath.Join(dir, "conf", "nginx.conf")
			if err := os.WriteFile(conf, golden, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := nginx.Check(context.Background(), bin, dir, conf); err != nil {
				t.Fatalf("nginx -t %s: %v", name, err)
			}
		})
	}
}

// needsLua skips (fails in CI) when nginx's Lua module does not work here.
func needsLua(t *testing.T, bin string) *nginx.Lua {
	t.Helper()
	lua, err := nginx.DetectLua(context.Background(), bin, t.TempDir(), nil)
	if err != nil {
		if needs.InCI() {
			t.Fatalf("nginx Lua module (Debian libnginx-mod-http-lua): %v", err)
		}
		t.Skipf("nginx Lua module: %v", err)
	}
	return lua
}
