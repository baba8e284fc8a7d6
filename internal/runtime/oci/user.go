package oci

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// passwdEntry is one line of /etc/passwd.
type passwdEntry struct {
	name     string
	uid, gid uint32
}

// groupEntry is one line of /etc/group.
type groupEntry struct {
	name    string
	gid     uint32
	members []string
}

// resolveUser picks the process user as containerd's CRI plugin does: run_as_user or
// run_as_username, else the image's User ("", "uid", "name", "uid:gid", "name:group"); a
// numeric uid takes its primary group from the rootfs's /etc/passwd (0 if it is not there);
// run_as_group overrides the group. Additional gids are the primary gid, the groups of
// /etc/group that list the user (unless the supplemental groups policy is Strict; a group named
// as the user does not count), and the CRI supplemental groups.
func resolveUser(rootfs string, sc *runtimeapi.LinuxContainerSecurityContext, imageUser string) (specs.User, error) {
	var (
		u   passwdEntry
		err error
	)
	switch {
	case sc.GetRunAsUser() != nil:
		u, err = lookupUser(rootfs, strconv.FormatInt(sc.GetRunAsUser().GetValue(), 10))
	case sc.GetRunAsUsername() != "":
		u, err = lookupUser(rootfs, sc.GetRunAsUsername())
	default:
		name, group, hasGroup := strings.Cut(imageUser, ":")
		if name == "" {
			name = "0"
		}
		u, err = lookupUser(rootfs, name)
		if err == nil && hasGroup {
			u.gid, err = lookupGroup(rootfs, group)
		}
	}
	if err != nil {
		return specs.User{}, err
	}
	if g := sc.GetRunAsGroup(); g != nil {
		u.gid = uint32(g.GetValue())
	}
	gids := []uint32{u.gid}
	add := func(g uint32) {
		for _, x := range gids {
			if x == g {
				return
			}
		}
		gids = append(gids, g)
	}
	merge := sc.GetSupplementalGroupsPolicy() != runtimeapi.SupplementalGroupsPolicy_Strict
	if merge && u.name != "" {
		groups, err := readGroup(rootfs)
		if err != nil {
			return specs.User{}, err
		}
		for _, g := range groups {
			if g.name == u.name {
				continue // not a supplemental group, as containerd's
			}
			for _, m := range g.members {
				if m == u.name {
					add(g.gid)
				}
			}
		}
	}
	for _, g := range sc.GetSupplementalGroups() {
		add(uint32(g))
	}
	return specs.User{UID: u.uid, GID: u.gid, AdditionalGids: gids}, nil
}

// lookupUser resolves a name or a numeric uid against the rootfs's /etc/passwd. A numeric uid
// that is not listed is fine (gid 0, no name); an unknown name is an error.
func lookupUser(rootfs, s string) (passwdEntry, error) {
	users, err := readPasswd(rootfs)
	if err != nil {
		return passwdEntry{}, err
	}
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		for _, u := range users {
			if u.uid == uint32(n) {
				return u, nil
			}
		}
		return passwdEntry{uid: uint32(n)}, nil
	}
	for _, u := range users {
		if u.name == s {
			return u, nil
		}
	}
	return passwdEntry{}, fmt.Errorf("oci spec: user %q not found in the image's /etc/passwd", s)
}

// lookupGroup resolves a group name or a numeric gid against the rootfs's /etc/group.
func lookupGroup(rootfs, s string) (uint32, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n), nil
	}
	groups, err := readGroup(rootfs)
	if err != nil {
		return 0, err
	}
	for _, g := range groups {
		if g.name == s {
			return g.gid, nil
		}
	}
	return 0, fmt.Errorf("oci spec: group %q not found in the image's /etc/group", s)
}

func readPasswd(rootfs string) ([]passwdEntry, error) {
	var out []passwdEntry
	err := readColonFile(rootfs, "/etc/passwd", func(f []string) {
		if len(f) < 4 {
			return
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 == nil && err2 == nil {
			out = append(out, passwdEntry{name: f[0], uid: uint32(uid), gid: uint32(gid)})
		}
	})
	return out, err
}

func readGroup(rootfs string) ([]groupEntry, error) {
	var out []groupEntry
	err := readColonFile(rootfs, "/etc/group", func(f []string) {
		if len(f) < 3 {
			return
		}
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			return
		}
		g := groupEntry{name: f[0], gid: uint32(gid)}
		if len(f) > 3 && f[3] != "" {
			g.members = strings.Split(f[3], ",")
		}
		out = append(out, g)
	})
	return out, err
}

// readColonFile calls fn with the fields of every non-comment line of the file at name inside
// rootfs. Symlinks resolve inside rootfs (openat2 RESOLVE_IN_ROOT), so an image cannot make us
// read host files. A missing file is no error.
func readColonFile(rootfs, name string, fn func([]string)) error {
	dir, err := os.Open(rootfs)
	if err != nil {
		return fmt.Errorf("oci spec: open rootfs: %w", err)
	}
	defer dir.Close()
	fd, err := unix.Openat2(int(dir.Fd()), name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("oci spec: open %s: %w", filepath.Join(rootfs, name), err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	r := bufio.NewReader(io.LimitReader(f, 16<<20))
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fn(strings.Split(line, ":"))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("oci spec: read %s: %w", name, err)
	}
	return nil
}
