package volume

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mountPoints lists the mount points of this mount namespace from /proc/self/mountinfo.
func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		out = append(out, unescapeMountField(fields[4]))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	return out, nil
}

// unescapeMountField undoes mountinfo's octal escapes (\040 for a space and the like).
func unescapeMountField(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// isMountPoint tells whether dir is a mount point.
func isMountPoint(dir string) (bool, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false, fmt.Errorf("resolve %s: %w", dir, err)
	}
	mps, err := mountPoints()
	if err != nil {
		return false, err
	}
	for _, mp := range mps {
		if mp == real {
			return true, nil
		}
	}
	return false, nil
}

// mountPointsUnder lists the mount points at or below dir, shallowest first.
func mountPointsUnder(dir string) ([]string, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", dir, err)
	}
	mps, err := mountPoints()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, mp := range mps {
		if (mp == real || strings.HasPrefix(mp, real+"/")) && !seen[mp] {
			seen[mp] = true
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.Count(out[i], "/") < strings.Count(out[j], "/") })
	return out, nil
}

// unmount unmounts path; a path that is no longer mounted is not an error.
func unmount(path string) error {
	err := unix.Unmount(path, unix.UMOUNT_NOFOLLOW)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}
