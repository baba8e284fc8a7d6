package runc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSealedCopy(t *testing.T) {
	src := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho copy \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := sealedCopy(src)
	if err != nil {
		t.Fatalf("sealedCopy: %v", err)
	}
	defer f.Close()
	if out, err := exec.Command(fdPath(f), "a").Output(); err != nil || string(out) != "copy a\n" {
		t.Errorf("running the copy through %s: %q, %v", fdPath(f), out, err)
	}
	if seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0); err != nil || seals != runcSeals {
		t.Errorf("seals %#x, %v; want %#x", seals, err, runcSeals)
	}
	if _, err := f.WriteAt([]byte("x"), 0); err == nil {
		t.Error("the sealed copy took a write")
	}
	w, err := os.OpenFile(fdPath(f), os.O_WRONLY, 0)
	if err == nil {
		_, err = w.Write([]byte("x"))
		w.Close()
	}
	if err == nil {
		t.Error("the sealed copy took a write through its /proc path")
	}
}

// TestRuncInitMakesNoCopy checks what the sealed copy is for: the init of a container the
// Runtime creates runs from the Runtime's copy — it did not copy and re-execute itself, which
// would leave it running from runc's own copy (a bind-mounted temporary file or a memfd
// named runc_cloned).
func TestRuncInitMakesNoCopy(t *testing.T) {
	f := newFixture(t)
	c := f.create(t, []string{"sleep", "5"}, nil)
	st, err := f.rt.State(context.Background(), c.id)
	if err != nil || st.Status != StatusCreated || st.Pid == 0 {
		t.Fatalf("State = %+v, %v", st, err)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", st.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(exe, "/memfd:runc ") {
		t.Errorf("the created container's init runs from %q, want the Runtime's sealed copy (/memfd:runc)", exe)
	}
}
