package oci

import (
	"reflect"
	"testing"
)

func TestCapsFromMask(t *testing.T) {
	// CAP_CHOWN (0), CAP_KILL (5), CAP_SYS_ADMIN (21), and bit 63 that no capability has.
	got := capsFromMask(1<<0 | 1<<5 | 1<<21 | 1<<63)
	if want := []string{"CAP_CHOWN", "CAP_KILL", "CAP_SYS_ADMIN"}; !reflect.DeepEqual(got, want) {
		t.Errorf("capsFromMask = %q, want %q", got, want)
	}
	if got := capsFromMask(0); got == nil || len(got) != 0 {
		t.Errorf("capsFromMask(0) = %#v, want an empty, non-nil list", got)
	}
}

func TestReadHost(t *testing.T) {
	h, err := ReadHost()
	if err != nil {
		t.Fatal(err)
	}
	if h.NOFILE == 0 || h.Capabilities == nil {
		t.Errorf("ReadHost = %+v", h)
	}
}
