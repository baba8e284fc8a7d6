package controlplane

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestBuildVersionFromBuildInfo(t *testing.T) {
	v := buildVersion(func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.99.1", Settings: []debug.BuildSetting{
			{Key: "-compiler", Value: "gc"}, {Key: "vcs.revision", Value: "0123abcd"},
			{Key: "vcs.time", Value: "2026-12-01T22:00:00Z"}, {Key: "vcs.modified", Value: "true"},
		}}, true
	})
	if v.GoVersion != "go1.99.1" || v.Compiler != "gc" || v.GitCommit != "0123abcd" || v.BuildDate != "2026-12-01T22:00:00Z" || v.GitTreeState != "dirty" {
		t.Errorf("version = %+v", v)
	}
	if v.Platform != runtime.GOOS+"/"+runtime.GOARCH || v.Major != "1" || v.Minor != "32" || v.GitVersion == "" {
		t.Errorf("version = %+v", v)
	}
}

func TestBuildVersionWithoutBuildInfo(t *testing.T) {
	v := buildVersion(func() (*debug.BuildInfo, bool) { return nil, false })
	if v.GoVersion != runtime.Version() || v.Compiler != runtime.Compiler || v.GitCommit != "" {
		t.Errorf("version = %+v", v)
	}
}
