// Package benchutil holds what the kubette benchmarks share: percentiles over
// latency samples, compact duration formatting and reading a process's
// resident memory from /proc.
package benchutil

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of sorted,
// which must be in ascending order. It returns 0 for an empty slice.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Sorted returns an ascending copy of samples.
func Sorted(samples []time.Duration) []time.Duration {
	s := slices.Clone(samples)
	slices.Sort(s)
	return s
}

// Median returns the median of values (the mean of the two middle values for an
// even count) and 0 for none.
func Median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	s := slices.Clone(values)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// FormatDuration prints d with about three significant digits: 412µs, 5.9ms,
// 31ms, 1.73s. Negative durations keep their sign.
func FormatDuration(d time.Duration) string {
	if d < 0 {
		return "-" + FormatDuration(-d)
	}
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

// MiB converts bytes to mebibytes.
func MiB(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// ReadRSS returns the resident set size (VmRSS) of process pid in bytes, read
// from /proc/PID/status.
func ReadRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read status of process %d: %w", pid, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		// "VmRSS:	   51234 kB"
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("process %d: unexpected VmRSS line %q", pid, sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("process %d: parse VmRSS: %w", pid, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("process %d: no VmRSS in /proc/%d/status (a kernel thread or a zombie?)", pid, pid)
}

// clockTick is USER_HZ, the unit of /proc/stat, which is 100 on Linux.
const clockTick = 10 * time.Millisecond

// HostCPU returns the CPU time all CPUs of the host spent busy (neither idle
// nor waiting for I/O) and waiting for I/O since boot, from /proc/stat. The
// difference of two readings shows how much else ran during a measurement.
func HostCPU() (busy, iowait time.Duration, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("read /proc/stat: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected first line of /proc/stat: %q", line)
	}
	for i, f := range fields[1:] {
		ticks, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parse /proc/stat field %d: %w", i+1, err)
		}
		switch i {
		case 3: // idle
		case 4:
			iowait = time.Duration(ticks) * clockTick
		case 8, 9: // guest time is already counted in user and nice
		default:
			busy += time.Duration(ticks) * clockTick
		}
	}
	return busy, iowait, nil
}

// LoadAverage returns the 1-minute load average from /proc/loadavg.
func LoadAverage() (float64, error) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, fmt.Errorf("read /proc/loadavg: %w", err)
	}
	f, _, _ := strings.Cut(string(data), " ")
	v, err := strconv.ParseFloat(f, 64)
	if err != nil {
		return 0, fmt.Errorf("parse /proc/loadavg: %w", err)
	}
	return v, nil
}
