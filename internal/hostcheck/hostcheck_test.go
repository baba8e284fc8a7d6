package hostcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckNamesWhatIsMissingAndHowToInstallIt(t *testing.T) {
	empty := t.TempDir()
	reqs := Check(Options{Runtime: "no-such-runtime-kubette", CNIPluginDirs: []string{empty}})
	err := Error(reqs)
	if err == nil {
		t.Fatal("expected an error for a missing runtime and plugins")
	}
	for _, want := range []string{"no-such-runtime-kubette", "CNI plugins", empty, "apt-get install -y no-such-runtime-kubette containernetworking-plugins"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestCNIPluginDirNeedsEveryPlugin(t *testing.T) {
	dir := t.TempDir()
	for i, p := range CNIPlugins() {
		if got := CNIPluginDir([]string{dir}); got != "" {
			t.Fatalf("with %d of %d plugins the dir was accepted", i, len(CNIPlugins()))
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := CNIPluginDir([]string{t.TempDir(), dir}); got != dir {
		t.Fatalf("CNIPluginDir = %q, want %q", got, dir)
	}
	if err := Error(Check(Options{Runtime: "sh", CNIPluginDirs: []string{dir}})); err != nil {
		t.Fatalf("nothing should be missing: %v", err)
	}
}

func TestNftOnlyWhenAsked(t *testing.T) {
	has := func(reqs []Requirement, pkg string) bool {
		for _, r := range reqs {
			if r.Package == pkg {
				return true
			}
		}
		return false
	}
	if has(Check(Options{Runtime: "sh"}), "nftables") {
		t.Error("nft is required without Nft")
	}
	reqs := Check(Options{Runtime: "sh", Nft: true, Iptables: true})
	if !has(reqs, "nftables") || !has(reqs, "iptables") {
		t.Errorf("with Nft and Iptables the requirements are %+v", reqs)
	}
}
