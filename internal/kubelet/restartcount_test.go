package kubelet

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRestartCountFromLogs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		want  int
	}{
		{"no directory", nil, 0},
		{"empty", []string{}, 0},
		{"first attempt", []string{"0.log"}, 1},
		{"several", []string{"0.log", "2.log", "1.log"}, 3},
		{"rotated", []string{"4.log.20261130-120000", "4.log.20261130-120000.gz", "3.log"}, 5},
		{"other files", []string{"x.log", "1.txt", "log", "01a.log", "7.logs"}, 0},
		{"too many digits", []string{"99999999999999999999999.log", "1.log"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "c")
			if tc.files != nil {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := restartCountFromLogs(dir)
			if err != nil || got != tc.want {
				t.Errorf("restartCountFromLogs(%v) = %d, %v; want %d", tc.files, got, err, tc.want)
			}
		})
	}
}

// TestRestartCountAfterRuntimeLostState: the runtime knows no container of the pod (its
// state was on a tmpfs and the machine rebooted), but the pod's log directory still holds
// the logs of attempts 0 and 1: the new container is attempt 2 (its log is 2.log, see
// containerConfig) and reports restart count 2, leaving the earlier logs alone.
func TestRestartCountAfterRuntimeLostState(t *testing.T) {
	h := newHarness(t)
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		Containers: []v1.Container{containerNamed("a", "img")},
	}})
	logs := filepath.Join(podLogDir(h.k.cfg.LogDir, pod), "a")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"0.log", "1.log"} {
		writeFile(t, filepath.Join(logs, f), "2026-01-01T00:00:00Z stdout F earlier life\n")
	}
	p := h.sync(pod)
	c := h.container(pod, "a")
	if c.Metadata.Attempt != 2 || c.Annotations[annotationRestartCount] != "2" {
		t.Fatalf("container after lost state: attempt %d, annotations %v", c.Metadata.Attempt, c.Annotations)
	}
	if n := p.Status.ContainerStatuses[0].RestartCount; n != 2 {
		t.Errorf("status restartCount %d, want 2", n)
	}
	if b, err := os.ReadFile(filepath.Join(logs, "0.log")); err != nil || len(b) == 0 {
		t.Errorf("attempt 0's log: %q, %v", b, err)
	}
}
