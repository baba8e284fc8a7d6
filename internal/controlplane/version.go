package controlplane

import (
	"runtime"
	"runtime/debug"

	"k8s.io/apimachinery/pkg/version"
)

// Version is the Kubernetes version kubette reports at /version and as the kubelet's
// version: the Kubernetes release it implements, and how this binary was built.
var Version = buildVersion(debug.ReadBuildInfo)

// buildVersion fills the build fields of upstream's version.Info from the binary's build
// information: the Go version, compiler and platform, and, when the build stamped them
// (go build in a git checkout without -buildvcs=false), the commit, whether the tree had
// changes (gitTreeState "dirty" or "clean") and the commit's time as buildDate.
func buildVersion(read func() (*debug.BuildInfo, bool)) version.Info {
	v := version.Info{
		Major: "1", Minor: "32", GitVersion: "v1.32.0-kubette",
		GoVersion: runtime.Version(), Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
	bi, ok := read()
	if !ok {
		return v
	}
	if bi.GoVersion != "" {
		v.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "-compiler":
			v.Compiler = s.Value
		case "vcs.revision":
			v.GitCommit = s.Value
		case "vcs.time":
			v.BuildDate = s.Value
		case "vcs.modified":
			v.GitTreeState = map[string]string{"true": "dirty", "false": "clean"}[s.Value]
		}
	}
	return v
}
