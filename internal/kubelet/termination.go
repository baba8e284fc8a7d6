package kubelet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/kubelet/server"
)

// Limits on termination messages, as upstream's.
const (
	maxTerminationMessage int64 = 4096
	fallbackLogLines            = 80
	fallbackLogBytes            = 2048
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
		p := k.terminationLogPath(pod.UID, c.Name, inst.restartCount)
		b, _, err := readTail(p, maxTerminationMessage)
		switch {
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return fmt.Sprintf("Error on reading termination log %s: %v", p, err)
		case len(b) > 0:
			return string(b)
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

// readTail reads the last max bytes of a file (all of a shorter one); cut tells whether it
// left out the beginning.
func readTail(path string, max int64) (b []byte, cut bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	off := fi.Size() - max
	if off < 0 {
		off = 0
	}
	b = make([]byte, fi.Size()-off)
	n, err := f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, err
	}
	return b[:n], off > 0, nil
}

// tailWindow is how much of the end of a log tailCRILog reads: far more than the entries of
// the last maxBytes of output take.
const tailWindow = 64 << 10

// tailCRILog is the end of what a container wrote to its CRI-format log, as upstream's
// kubelet reads it for a termination message: the output of the last `lines` entries (a
// partial entry gives its text, a full one its text and a newline), of that the last
// maxBytes.
func tailCRILog(path string, lines, maxBytes int) string {
	data, cut, err := readTail(path, tailWindow)
	if err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	if cut { // the window starts within an entry: skip it
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	var entries []server.Entry
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		if e, err := server.ParseLine(line); err == nil {
			entries = append(entries, e)
		}
	}
	if len(entries) > lines {
		entries = entries[len(entries)-lines:]
	}
	var out []byte
	for _, e := range entries {
		out = append(out, e.Log...)
		if !e.Partial {
			out = append(out, '\n')
		}
	}
	if len(out) > maxBytes {
		out = out[len(out)-maxBytes:]
	}
	return string(out)
}

func (k *Kubelet) terminationLogPath(uid types.UID, name string, restartCount int) string {
	return filepath.Join(k.cfg.RootDir, "pods", string(uid), "containers", name, strconv.Itoa(restartCount))
}
