package oci

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// devices turns the CRI devices (from device plugins) into device nodes and cgroup rules, as
// containerd's WithDevices: a host device node appears at its container path; a host directory
// contributes every device node below it, at the same relative path. It reads the host's
// device nodes (stat), the one other impure part of Spec.
func devices(cri []*runtimeapi.Device) ([]specs.LinuxDevice, []specs.LinuxDeviceCgroup, error) {
	var (
		nodes []specs.LinuxDevice
		rules []specs.LinuxDeviceCgroup
	)
	add := func(hostPath, containerPath, perms string) error {
		d, ok, err := deviceFromPath(hostPath)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		d.Path = containerPath
		nodes = append(nodes, d)
		rules = append(rules, specs.LinuxDeviceCgroup{Allow: true, Type: d.Type, Major: &d.Major, Minor: &d.Minor, Access: perms})
		return nil
	}
	for _, dev := range cri {
		host, ctr, perms := dev.GetHostPath(), dev.GetContainerPath(), dev.GetPermissions()
		if ctr == "" {
			ctr = host
		}
		if !path.IsAbs(ctr) {
			return nil, nil, fmt.Errorf("oci spec: device container path %q is not absolute", ctr)
		}
		if perms == "" {
			perms = "rwm"
		}
		fi, err := os.Stat(host)
		if err != nil {
			return nil, nil, fmt.Errorf("oci spec: device %s: %w", host, err)
		}
		if !fi.IsDir() {
			if _, ok, _ := deviceFromPath(host); !ok {
				return nil, nil, fmt.Errorf("oci spec: %s is not a device node", host)
			}
			if err := add(host, ctr, perms); err != nil {
				return nil, nil, err
			}
			continue
		}
		err = filepath.WalkDir(host, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(host, p)
			if err != nil {
				return err
			}
			return add(p, path.Join(ctr, filepath.ToSlash(rel)), perms)
		})
		if err != nil {
			return nil, nil, fmt.Errorf("oci spec: devices below %s: %w", host, err)
		}
	}
	return nodes, rules, nil
}

// deviceFromPath describes the device node at p (following symlinks); ok is false when p is
// not a character or block device.
func deviceFromPath(p string) (specs.LinuxDevice, bool, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return specs.LinuxDevice{}, false, fmt.Errorf("oci spec: device %s: %w", p, err)
	}
	var typ string
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		typ = "c"
	case unix.S_IFBLK:
		typ = "b"
	default:
		return specs.LinuxDevice{}, false, nil
	}
	mode := os.FileMode(st.Mode & 0o777)
	uid, gid := st.Uid, st.Gid
	return specs.LinuxDevice{
		Type: typ, Major: int64(unix.Major(uint64(st.Rdev))), Minor: int64(unix.Minor(uint64(st.Rdev))),
		FileMode: &mode, UID: &uid, GID: &gid,
	}, true, nil
}
