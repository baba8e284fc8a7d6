package oci

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Host is what the runtime process itself can grant a container: the bounds Input asks for.
type Host struct {
	OOMScoreAdj  int      // our /proc/self/oom_score_adj: Input.MaxOOMScoreAdj
	NOFILE       uint64   // our hard RLIMIT_NOFILE: Input.MaxNOFILE
	Capabilities []string // our effective capabilities: Input.HostCapabilities
}

// ReadHost reads the runtime process's own limits (the one impure helper of this package).
func ReadHost() (Host, error) {
	var h Host
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return Host{}, fmt.Errorf("read own oom_score_adj: %w", err)
	}
	if h.OOMScoreAdj, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
		return Host{}, fmt.Errorf("parse own oom_score_adj %q: %w", b, err)
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return Host{}, fmt.Errorf("read own RLIMIT_NOFILE: %w", err)
	}
	h.NOFILE = rl.Max
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return Host{}, fmt.Errorf("read own capabilities: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "CapEff:")
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return Host{}, fmt.Errorf("parse own CapEff %q: %w", v, err)
		}
		h.Capabilities = capsFromMask(mask)
		return h, nil
	}
	if err := sc.Err(); err != nil {
		return Host{}, fmt.Errorf("read own capabilities: %w", err)
	}
	return Host{}, fmt.Errorf("no CapEff in /proc/self/status")
}

// capsFromMask names the capabilities of a kernel capability bit mask that this package knows.
func capsFromMask(mask uint64) []string {
	caps := []string{}
	for bit, name := range AllCapabilities() {
		if mask&(1<<uint(bit)) != 0 {
			caps = append(caps, name)
		}
	}
	return caps
}
