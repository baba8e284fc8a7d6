package kubelet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
)

// attemptLogFile matches a container attempt's log file in the container's log directory,
// "<attempt>.log", and the rotated ones, "<attempt>.log.<suffix>".
var attemptLogFile = regexp.MustCompile(`^([0-9]+)\.log(\..*)?$`)

// restartCountFromLogs is the restart count of a container the runtime has no record of:
// one more than the highest attempt whose log file is in dir (0 when there is none, or no
// dir). A runtime loses its records when its state is on a tmpfs and the machine reboots;
// the logs stay on disk, so the count goes on instead of starting again at 0 (and the new
// attempt's log does not overwrite attempt 0's), as upstream's kubelet does.
func restartCountFromLogs(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("container log directory: %w", err)
	}
	count := 0
	for _, e := range entries {
		m := attemptLogFile.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			continue // more digits than an int holds: not one of ours
		}
		count = max(count, n+1)
	}
	return count, nil
}
