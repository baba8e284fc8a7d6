package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestInsecureRegistryFlag(t *testing.T) {
	want := []string{"myreg:5000", "10.1.2.3", "[fd00::1]:5000", "172.20.0.0/16"}
	args := []string{"--insecure-registry", "myreg:5000, 10.1.2.3", "--insecure-registry=[fd00::1]:5000", "--insecure-registry", "172.20.0.0/16"}

	// up: the node's runtime configuration gets the list.
	var n nodeFlags
	cmd := &cobra.Command{}
	n.register(cmd)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	n.enabled = true
	if got := n.config().Runtime.InsecureRegistries; !slices.Equal(got, want) {
		t.Errorf("up --insecure-registry: runtime config has %q, want %q", got, want)
	}

	// runtime: the same flag.
	rt := newRuntime()
	if err := rt.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	if got := rt.Flags().Lookup("insecure-registry").Value.String(); got != strings.Join(want, ",") {
		t.Errorf("runtime --insecure-registry = %q", got)
	}

	// Malformed entries fail at parsing, naming the entry.
	for _, bad := range []string{"http://myreg:5000", "myreg:5000,", "myreg:99999", "my_reg", "[10.0.0.1]:5000"} {
		for _, c := range []*cobra.Command{newRuntime(), newUp()} {
			err := c.ParseFlags([]string{"--insecure-registry", bad})
			if err == nil || !strings.Contains(err.Error(), "insecure registry") || !strings.Contains(err.Error(), "--insecure-registry") {
				t.Errorf("%s --insecure-registry %q: %v, want an error naming the flag and the entry", c.Name(), bad, err)
			}
		}
	}
}
