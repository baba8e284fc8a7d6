package kubelet

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Limits on termination messages, as upstream's.
const (
	maxTerminationMessage = 4096
	fallbackLogLines      = 80
	fallbackLogBytes      = 2048
)

// terminated is the terminated state of an exited container instance.
func (k *Kubelet) terminated(pod *v1.Pod, c *v1.Container, inst *containerState) *v1.ContainerStateTerminated {
	s := inst.status
	if s.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		return nil
	}
	t := &v1.ContainerStateTerminated{
		ExitCode:    s.ExitCode,
		Reason:      s.Reason,
		Message:     s.Message,
		ContainerID: containerIDPrefix + s.Id,
	}
	if s.StartedAt != 0 {
		t.StartedAt = apiTime(time.Unix(0, s.StartedAt))
	}
	if s.FinishedAt != 0 {
		t.FinishedAt = apiTime(time.Unix(0, s.FinishedAt))
	}
	if t.Reason == "" {
		t.Reason = "Error"
		if t.ExitCode == 0 {
			t.Reason = "Completed"
		}
	}
	// What the container wrote enriches the runtime's message, as upstream.
	if msg := k.terminationMessage(pod, c, inst); msg != "" {
		if t.Message != "" {
			t.Message += ": "
		}
		t.Message += msg
	}
	return t
}

// terminationMessage reads what the container wrote to its termination message path, or,
// with FallbackToLogsOnError and a failure, the tail of its log.
func (k *Kubelet) terminationMessage(pod *v1.Pod, c *v1.Container, inst *containerState) string {
	if c.TerminationMessagePath != "" {
		if f, err := os.Open(k.terminationLogPath(pod.UID, c.Name, inst.restartCount)); err == nil {
			b, _ := io.ReadAll(io.LimitReader(f, maxTerminationMessage))
			f.Close()
			if len(b) > 0 {
				return string(b)
			}
		}
	}
	// A container that could not even start has no logs to fall back to.
	if c.TerminationMessagePolicy != v1.TerminationMessageFallbackToLogsOnError || inst.status.ExitCode == 0 ||
		inst.status.Reason == "ContainerCannotRun" {
		return ""
	}
	logPath := inst.status.LogPath
	if logPath == "" {
		logPath = filepath.Join(podLogDir(k.cfg.LogDir, pod), c.Name, strconv.Itoa(inst.restartCount)+".log")
	}
	return tailCRILog(logPath, fallbackLogLines, fallbackLogBytes)
}

// tailCRILog returns the last lines of a CRI-format log ("<time> <stream> <P|F> <text>"),
// at most maxBytes of them.
func tailCRILog(path string, lines, maxBytes int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	partial := ""
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 4)
		if len(f) < 3 {
			continue
		}
		text := ""
		if len(f) == 4 {
			text = f[3]
		}
		if f[2] == "P" {
			partial += text
			continue
		}
		out = append(out, partial+text)
		partial = ""
	}
	if len(out) > lines {
		out = out[len(out)-lines:]
	}
	s := strings.Join(out, "\n")
	if len(out) > 0 {
		s += "\n"
	}
	if len(s) > maxBytes {
		s = s[len(s)-maxBytes:]
	}
	return s
}

func (k *Kubelet) terminationLogPath(uid types.UID, name string, restartCount int) string {
	return filepath.Join(k.cfg.RootDir, "pods", string(uid), "containers", name, strconv.Itoa(restartCount))
}
