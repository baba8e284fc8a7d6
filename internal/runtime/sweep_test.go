package runtime

import (
	"slices"
	"strings"
	"testing"
)

func TestParseMountsUnder(t *testing.T) {
	info := `22 1 0:21 / / rw - ext4 /dev/vda rw
100 22 0:50 / /data/runtime/netns/abc rw - nsfs nsfs rw
101 22 0:51 / /data/runtime/containers/c1/bundle/rootfs rw - overlay overlay rw
102 101 0:52 / /data/runtime/containers/c1/bundle/rootfs/dev rw - tmpfs tmpfs rw
103 22 0:53 / /data/runtime-other/x rw - tmpfs tmpfs rw
104 22 0:54 / /data/runtime/with\040space rw - tmpfs tmpfs rw
`
	got, err := parseMountsUnder(strings.NewReader(info), "/data/runtime")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/data/runtime/containers/c1/bundle/rootfs/dev",
		"/data/runtime/containers/c1/bundle/rootfs",
		"/data/runtime/netns/abc",
		"/data/runtime/with space",
	}
	slices.Sort(got[2:])
	if !slices.Equal(got, want) {
		t.Errorf("mounts = %q, want %q (deepest first, nothing outside the dir)", got, want)
	}
}
