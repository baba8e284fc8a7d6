// Package hostcheck tells what a machine lacks to run kubette's node components (an OCI runtime,
// the CNI plugins, iptables, nginx), naming each missing piece and the Debian package that
// provides it, so `kubette up` can refuse early with one clear message instead of failing later.
package hostcheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Requirement is one thing the node needs.
type Requirement struct {
	// What names the requirement for people ("an OCI runtime (runc or crun)").
	What string
	// Package is the Debian package that provides it.
	Package string
	// Found is where it was found; empty when missing.
	Found string
}

// Missing reports whether the requirement is unmet.
func (r Requirement) Missing() bool { return r.Found == "" }

// Options selects what to check.
type Options struct {
	// Runtime is the OCI runtime binary wanted ("runc" or "crun"; empty: either).
	Runtime string
	// CNIPluginDirs are searched for the standard plugins.
	CNIPluginDirs []string
	// Iptables and Nginx say whether those are needed.
	Iptables, Nginx bool
	// Nft says whether the nft tool is needed (the service proxy's nftables mode).
	Nft bool
}

// DefaultCNIPluginDirs returns where the standard CNI plugins are looked for, Debian's first.
func DefaultCNIPluginDirs() []string { return []string{"/usr/lib/cni", "/opt/cni/bin"} }

// CNIPlugins are the plugins the built-in runtime's network configuration uses.
func CNIPlugins() []string { return []string{"bridge", "host-local", "loopback", "portmap"} }

// Check returns every requirement with where it was found.
func Check(o Options) []Requirement {
	var out []Requirement
	switch o.Runtime {
	case "":
		r := Requirement{What: "an OCI runtime (runc or crun)", Package: "runc"}
		r.Found = firstBinary("runc", "crun")
		out = append(out, r)
	default:
		out = append(out, Requirement{What: "the OCI runtime " + o.Runtime, Package: o.Runtime, Found: firstBinary(o.Runtime)})
	}
	dirs := o.CNIPluginDirs
	if len(dirs) == 0 {
		dirs = DefaultCNIPluginDirs()
	}
	out = append(out, Requirement{
		What:    fmt.Sprintf("the CNI plugins %s in %s", strings.Join(CNIPlugins(), ", "), strings.Join(dirs, " or ")),
		Package: "containernetworking-plugins",
		Found:   CNIPluginDir(dirs),
	})
	if o.Iptables {
		out = append(out, Requirement{What: "iptables-restore", Package: "iptables", Found: firstBinary("iptables-restore")})
	}
	if o.Nft {
		out = append(out, Requirement{What: "nft (the proxy's nftables mode)", Package: "nftables", Found: firstBinary("nft")})
	}
	if o.Nginx {
		out = append(out, NginxRequirement(firstBinary("nginx")))
	}
	return out
}

// NginxRequirement is nginx for the ingress controller, found at nginx ("" = not found).
func NginxRequirement(nginx string) Requirement {
	return Requirement{What: "nginx (the ingress controller's proxy; libnginx-mod-http-lua lets it change endpoints without reloads)", Package: "nginx libnginx-mod-http-lua", Found: nginx}
}

// CNIPluginDir returns the first of dirs that holds every plugin of CNIPlugins, or "".
func CNIPluginDir(dirs []string) string {
	for _, d := range dirs {
		ok := true
		for _, p := range CNIPlugins() {
			if st, err := os.Stat(filepath.Join(d, p)); err != nil || st.IsDir() {
				ok = false
				break
			}
		}
		if ok {
			return d
		}
	}
	return ""
}

// Error returns nil when nothing is missing, else one error naming every missing piece and the
// command that installs them.
func Error(reqs []Requirement) error {
	var what, pkgs []string
	for _, r := range reqs {
		if r.Missing() {
			what = append(what, r.What)
			pkgs = append(pkgs, r.Package)
		}
	}
	if len(what) == 0 {
		return nil
	}
	return fmt.Errorf("this machine lacks %s; install with: apt-get install -y %s",
		strings.Join(what, "; "), strings.Join(pkgs, " "))
}

// firstBinary returns the path of the first of names found on PATH or in the sbin directories
// (which a non-login root shell may lack on PATH), or "".
func firstBinary(names ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
		for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
			p := filepath.Join(dir, n)
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				return p
			}
		}
	}
	return ""
}

// Binary returns the path of an executable on PATH or in the sbin directories, or "".
func Binary(name string) string { return firstBinary(name) }
