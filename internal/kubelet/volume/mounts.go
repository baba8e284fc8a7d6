package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/kubelet/fieldpath"
)

// Mounts returns the CRI mounts of a container's volumeMounts, in their order. configMap,
// secret, downwardAPI and projected volumes are always read-only; a subPath (or a
// subPathExpr expanded with the container's env) is created in the volume when missing and
// must stay inside its volume after resolving symlinks; the mount's host path is the resolved
// one. The termination message file is not among them: the kubelet mounts it itself.
func (m *Manager) Mounts(pod *v1.Pod, c *v1.Container) ([]*runtimeapi.Mount, error) {
	var env map[string]string
	out := make([]*runtimeapi.Mount, 0, len(c.VolumeMounts))
	for i := range c.VolumeMounts {
		vm := &c.VolumeMounts[i]
		var vol *v1.Volume
		for j := range pod.Spec.Volumes {
			if pod.Spec.Volumes[j].Name == vm.Name {
				vol = &pod.Spec.Volumes[j]
				break
			}
		}
		if vol == nil {
			return nil, fmt.Errorf("cannot find volume %q to mount into container %q", vm.Name, c.Name)
		}
		hostPath, mustRO, err := m.hostPathOf(pod, vol)
		if err != nil {
			return nil, err
		}
		subPath := vm.SubPath
		if vm.SubPathExpr != "" {
			if env == nil {
				env = containerEnv(pod, c)
			}
			subPath = fieldpath.Expand(vm.SubPathExpr, env)
		}
		if subPath != "" {
			if hostPath, err = resolveSubPath(hostPath, subPath); err != nil {
				return nil, fmt.Errorf("volumeMount %q of container %q: %w", vm.Name, c.Name, err)
			}
		}
		prop, err := propagation(vm, c)
		if err != nil {
			return nil, err
		}
		readOnly := vm.ReadOnly || mustRO
		out = append(out, &runtimeapi.Mount{
			ContainerPath:     vm.MountPath,
			HostPath:          hostPath,
			Readonly:          readOnly,
			RecursiveReadOnly: readOnly && vm.RecursiveReadOnly != nil && *vm.RecursiveReadOnly == v1.RecursiveReadOnlyEnabled,
			Propagation:       prop,
			SelinuxRelabel:    false,
		})
	}
	return out, nil
}

// propagation maps a volumeMount's mountPropagation to CRI's; Bidirectional needs a
// privileged container, as upstream.
func propagation(vm *v1.VolumeMount, c *v1.Container) (runtimeapi.MountPropagation, error) {
	if vm.MountPropagation == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	}
	switch *vm.MountPropagation {
	case v1.MountPropagationNone:
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	case v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, nil
	case v1.MountPropagationBidirectional:
		if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
			return 0, errors.New("Bidirectional mount propagation is available only to privileged containers")
		}
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, nil
	}
	return 0, fmt.Errorf("invalid mount propagation mode %q", *vm.MountPropagation)
}

// resolveSubPath returns the real path of subPath inside the volume at volPath, creating it as
// a directory (with the volume's mode) when missing. It rejects absolute subPaths, ".."
// elements and anything that resolves outside the volume through a symlink.
func resolveSubPath(volPath, subPath string) (string, error) {
	if filepath.IsAbs(subPath) {
		return "", fmt.Errorf("error SubPath `%s` must not be an absolute path", subPath)
	}
	for _, el := range strings.Split(subPath, "/") {
		if el == ".." {
			return "", fmt.Errorf("unable to provision SubPath `%s`: must not contain '..'", subPath)
		}
	}
	root, err := filepath.EvalSymlinks(volPath)
	if err != nil {
		return "", fmt.Errorf("resolve volume path: %w", err)
	}
	// Walk down one element at a time so that no directory is created through a symlink that
	// leads out of the volume.
	cur := root
	for _, el := range strings.Split(filepath.Clean(subPath), "/") {
		if el == "" || el == "." {
			continue
		}
		next := filepath.Join(cur, el)
		if _, err := os.Lstat(next); errors.Is(err, fs.ErrNotExist) {
			info, err := os.Stat(cur)
			if err != nil {
				return "", fmt.Errorf("subPath %q: %w", subPath, err)
			}
			if err := os.Mkdir(next, info.Mode().Perm()); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", fmt.Errorf("failed to create subPath directory %q: %w", subPath, err)
			}
		} else if err != nil {
			return "", fmt.Errorf("subPath %q: %w", subPath, err)
		}
		real, err := filepath.EvalSymlinks(next)
		if err != nil {
			return "", fmt.Errorf("subPath %q: %w", subPath, err)
		}
		if real != root && !strings.HasPrefix(real, root+"/") {
			return "", fmt.Errorf("subPath %q resolves to %s, outside its volume", subPath, real)
		}
		cur = real
	}
	return cur, nil
}

// containerEnv returns the container's env that subPathExpr may use: literal values (with
// earlier variables expanded, as upstream) and pod fieldRefs. Variables from ConfigMaps,
// Secrets and resources are not resolved here; references to them stay unexpanded.
func containerEnv(pod *v1.Pod, c *v1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = fieldpath.Expand(e.Value, env)
		case e.ValueFrom.FieldRef != nil:
			if v, err := podFieldValue(pod, e.ValueFrom.FieldRef.FieldPath); err == nil {
				env[e.Name] = v
			}
		}
	}
	return env
}
