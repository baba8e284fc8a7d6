// Package volume materialises a pod's volumes on the node — emptyDir (on disk or tmpfs),
// configMap, secret, downwardAPI, projected and hostPath — below
// RootDir/pods/<uid>/volumes/<plugin>/<name> with upstream's plugin directory names, turns a
// container's volumeMounts into CRI mounts (subPath and subPathExpr included) and tears a pod's
// volumes down again. Secret and projected volumes live on a tmpfs of their own, as upstream,
// so that secrets never reach the disk. It implements the kubelet's VolumeManager.
package volume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Upstream's plugin directory names below RootDir/pods/<uid>/volumes.
const (
	PluginEmptyDir    = "kubernetes.io~empty-dir"
	PluginConfigMap   = "kubernetes.io~configmap"
	PluginSecret      = "kubernetes.io~secret"
	PluginDownwardAPI = "kubernetes.io~downward-api"
	PluginProjected   = "kubernetes.io~projected"
)

// Config configures a Manager.
type Config struct {
	// RootDir is DATA_DIR/kubelet; pod volumes live below RootDir/pods/<uid>/volumes.
	RootDir string
	// Client reads ConfigMaps and Secrets (and requests service account tokens).
	Client kubernetes.Interface
	// Logger logs; nil discards.
	Logger *slog.Logger
	// SecretsOnDisk writes secret and projected volumes to disk instead of a tmpfs of their
	// own (upstream keeps them in memory so that secrets never reach the disk). Only for
	// tests that cannot mount.
	SecretsOnDisk bool
}

// Manager sets up, mounts and tears down pod volumes. It keeps no state of its own beyond the
// files on disk, so it picks up after a kubelet restart.
type Manager struct {
	root          string
	client        kubernetes.Interface
	log           *slog.Logger
	secretsOnDisk bool
}

// New returns a Manager. RootDir must be set; Client may be nil only for pods without
// configMap, secret and projected volumes.
func New(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{root: filepath.Clean(cfg.RootDir), client: cfg.Client, log: cfg.Logger, secretsOnDisk: cfg.SecretsOnDisk}
}

// podDir returns RootDir/pods/<uid>, refusing UIDs that are not a single path element.
func (m *Manager) podDir(uid types.UID) (string, error) {
	s := string(uid)
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\x00") {
		return "", fmt.Errorf("invalid pod UID %q", s)
	}
	return filepath.Join(m.root, "pods", s), nil
}

// volumeDir returns the directory of a pod's volume of a plugin.
func (m *Manager) volumeDir(uid types.UID, plugin, name string) (string, error) {
	pd, err := m.podDir(uid)
	if err != nil {
		return "", err
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return "", fmt.Errorf("invalid volume name %q", name)
	}
	return filepath.Join(pd, "volumes", plugin, name), nil
}

// Setup materialises every volume of pod. It is idempotent: a second call updates configMap,
// secret, downwardAPI and projected contents when their sources (or the pod's labels and
// annotations) changed, atomically. allocatable is the node's: downwardAPI limits a container
// does not set resolve to it. Errors of the volumes are joined; each names its volume.
func (m *Manager) Setup(ctx context.Context, pod *v1.Pod, allocatable v1.ResourceList) error {
	var errs []error
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if err := m.setupVolume(ctx, pod, allocatable, vol); err != nil {
			errs = append(errs, fmt.Errorf("volume %q: %w", vol.Name, err))
		}
	}
	return errors.Join(errs...)
}

// setupVolume materialises one volume.
func (m *Manager) setupVolume(ctx context.Context, pod *v1.Pod, allocatable v1.ResourceList, vol *v1.Volume) error {
	src := &vol.VolumeSource
	switch {
	case src.EmptyDir != nil:
		dir, err := m.volumeDir(pod.UID, PluginEmptyDir, vol.Name)
		if err != nil {
			return err
		}
		return setupEmptyDir(dir, src.EmptyDir, fsGroup(pod))
	case src.HostPath != nil:
		return checkHostPath(src.HostPath)
	case src.ConfigMap != nil:
		return m.writeVolume(ctx, pod, vol.Name, PluginConfigMap, func() (map[string]File, error) {
			return m.configMapPayload(ctx, pod.Namespace, src.ConfigMap)
		})
	case src.Secret != nil:
		return m.writeVolume(ctx, pod, vol.Name, PluginSecret, func() (map[string]File, error) {
			return m.secretPayload(ctx, pod.Namespace, src.Secret)
		})
	case src.DownwardAPI != nil:
		return m.writeVolume(ctx, pod, vol.Name, PluginDownwardAPI, func() (map[string]File, error) {
			return downwardAPIPayload(pod, allocatable, src.DownwardAPI.Items, defaultModeOf(src.DownwardAPI.DefaultMode))
		})
	case src.Projected != nil:
		return m.writeVolume(ctx, pod, vol.Name, PluginProjected, func() (map[string]File, error) {
			return m.projectedPayload(ctx, pod, allocatable, src.Projected)
		})
	default:
		return fmt.Errorf("unsupported volume type (this node supports emptyDir, hostPath, configMap, secret, downwardAPI and projected)")
	}
}

// writeVolume computes a volume's payload and writes it atomically into its directory.
func (m *Manager) writeVolume(ctx context.Context, pod *v1.Pod, name, plugin string, payload func() (map[string]File, error)) error {
	dir, err := m.volumeDir(pod.UID, plugin, name)
	if err != nil {
		return err
	}
	files, err := payload()
	if err != nil {
		return err
	}
	if (plugin == PluginSecret || plugin == PluginProjected) && !m.secretsOnDisk {
		if err := ensureTmpfs(dir, "0755", ""); err != nil {
			return err
		}
	}
	if gid := fsGroup(pod); gid != nil {
		// As upstream's volume ownership for read-only volumes: the fsGroup owns the files
		// and can read them.
		for p, f := range files {
			f.GID, f.Mode = gid, f.Mode|0o440
			files[p] = f
		}
	}
	changed, err := WriteAtomic(dir, files)
	if err != nil {
		return err
	}
	if changed {
		m.log.DebugContext(ctx, "volume written", "pod", pod.Namespace+"/"+pod.Name, "volume", name, "plugin", plugin, "files", len(files))
	}
	return nil
}

// hostPathOf returns where a pod's volume lives on the host and whether containers must mount
// it read-only whatever the volumeMount says (configMap, secret, downwardAPI, projected).
func (m *Manager) hostPathOf(pod *v1.Pod, vol *v1.Volume) (path string, readOnly bool, err error) {
	src := &vol.VolumeSource
	var plugin string
	switch {
	case src.HostPath != nil:
		return filepath.Clean(src.HostPath.Path), false, nil
	case src.EmptyDir != nil:
		plugin = PluginEmptyDir
	case src.ConfigMap != nil:
		plugin, readOnly = PluginConfigMap, true
	case src.Secret != nil:
		plugin, readOnly = PluginSecret, true
	case src.DownwardAPI != nil:
		plugin, readOnly = PluginDownwardAPI, true
	case src.Projected != nil:
		plugin, readOnly = PluginProjected, true
	default:
		return "", false, fmt.Errorf("volume %q: unsupported volume type", vol.Name)
	}
	path, err = m.volumeDir(pod.UID, plugin, vol.Name)
	return path, readOnly, err
}

// TearDown unmounts a pod's tmpfs volumes and removes RootDir/pods/<uid>. It never follows a
// symlink or a hostPath out of the pod directory, and refuses to remove anything while a mount
// point remains below it. A pod directory that does not exist is not an error.
func (m *Manager) TearDown(ctx context.Context, uid types.UID) error {
	pd, err := m.podDir(uid)
	if err != nil {
		return err
	}
	info, err := os.Lstat(pd)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tear down pod %s: %w", uid, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("tear down pod %s: %s is not a directory", uid, pd)
	}
	// Deepest first, so nested mounts come off before their parents; a few rounds for mounts
	// stacked on one path.
	for round := 0; ; round++ {
		mounts, err := mountPointsUnder(pd)
		if err != nil {
			return fmt.Errorf("tear down pod %s: %w", uid, err)
		}
		if len(mounts) == 0 {
			break
		}
		if round == 8 {
			return fmt.Errorf("tear down pod %s: refusing to remove %s: %s is still a mount point", uid, pd, mounts[0])
		}
		for i := len(mounts) - 1; i >= 0; i-- {
			if err := unmount(mounts[i]); err != nil {
				return fmt.Errorf("tear down pod %s: unmount %s: %w", uid, mounts[i], err)
			}
			m.log.DebugContext(ctx, "volume unmounted", "pod", string(uid), "path", mounts[i])
		}
	}
	if err := os.RemoveAll(pd); err != nil {
		return fmt.Errorf("tear down pod %s: %w", uid, err)
	}
	return nil
}

// TearDownAll tears down every pod's volumes below RootDir/pods (TearDown of each), for
// `kubette down`: the pods' memory-backed volumes (secrets, projected, emptyDir with medium
// Memory) are tmpfs mounts that outlive the kubelet. A missing pods directory is not an error.
func (m *Manager) TearDownAll(ctx context.Context) error {
	entries, err := os.ReadDir(filepath.Join(m.root, "pods"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tear down pod volumes: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if err := m.TearDown(ctx, types.UID(e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fsGroup returns the pod's fsGroup, or nil.
func fsGroup(pod *v1.Pod) *int64 {
	if pod.Spec.SecurityContext == nil {
		return nil
	}
	return pod.Spec.SecurityContext.FSGroup
}
