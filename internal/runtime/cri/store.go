package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sandbox is a pod sandbox's record. Its fields are guarded by Server.mu; op serialises the
// sandbox's lifecycle operations (stop, remove).
type sandbox struct {
	op   sync.Mutex
	meta sandboxMeta
	cfg  *runtimeapi.PodSandboxConfig // never changed after creation
}

// sandboxMeta is a sandbox's meta.json.
type sandboxMeta struct {
	ID        string          `json:"id"`
	Config    json.RawMessage `json:"config"`
	Ready     bool            `json:"ready"`
	CreatedAt int64           `json:"createdAt"`
	HostNet   bool            `json:"hostNetwork"`
	NetNSPath string          `json:"netnsPath,omitempty"`
	IPs       []string        `json:"ips,omitempty"`
	Hostname  string          `json:"hostname"`
	// Handler is the CRI runtime handler the sandbox was asked for ("" the default).
	Handler string `json:"runtimeHandler,omitempty"`
	// PodNS are the pod's IPC namespace, shm and pid namespace holder.
	PodNS PodNamespaces `json:"podNamespaces"`
}

// container is a container's record. Its fields are guarded by Server.mu; op serialises the
// container's lifecycle operations (start, stop, remove, update).
type container struct {
	op     sync.Mutex
	saveMu sync.Mutex // serialises writes of meta.json, each of the record as it is then
	meta   containerMeta
	live   liveInit                    // the init the runtime last reported running; not persisted
	cfg    *runtimeapi.ContainerConfig // replaced, never mutated, by UpdateContainerResources
	// starting is set while StartContainer creates the container in the low-level runtime
	// (meta.Started is already recorded): the container is still CREATED. Not persisted.
	starting bool
}

// liveInit identifies a running container's init process.
type liveInit struct {
	pid       int
	start     string // /proc/<pid>/stat starttime
	startedAt int64
}

// containerMeta is a container's meta.json.
type containerMeta struct {
	ID          string          `json:"id"`
	SandboxID   string          `json:"sandboxId"`
	Config      json.RawMessage `json:"config"`
	ImageID     string          `json:"imageId"`
	ImageName   string          `json:"imageName"`
	ImageRef    string          `json:"imageRef"`
	StopSignal  string          `json:"stopSignal,omitempty"`
	CgroupsPath string          `json:"cgroupsPath"`
	CreatedAt   int64           `json:"createdAt"`
	LogPath     string          `json:"logPath,omitempty"`
	Started     bool            `json:"started,omitempty"`
	// User is who the container's process runs as, from its OCI spec.
	User processUser `json:"user"`
	// Final is the container's last status once it exited; cached because the low-level
	// runtime forgets a container once it is deleted.
	Final *finalStatus `json:"final,omitempty"`
}

// processUser is the user of a container's process.
type processUser struct {
	UID  uint32   `json:"uid"`
	GID  uint32   `json:"gid"`
	Gids []uint32 `json:"gids,omitempty"`
}

// finalStatus is how a container ended.
type finalStatus struct {
	ExitCode   int32  `json:"exitCode"`
	StartedAt  int64  `json:"startedAt,omitempty"`
	FinishedAt int64  `json:"finishedAt"`
	Reason     string `json:"reason,omitempty"`
	Message    string `json:"message,omitempty"`
}

// writeJSON writes v to path atomically: a temporary file (mode 0600, as CreateTemp makes it)
// in the same directory, synced, then renamed over path.
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".meta-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// saveSandbox writes the sandbox's meta.json; the caller holds s.mu or owns sb exclusively.
func (s *Server) saveSandbox(m sandboxMeta) error {
	return writeJSON(filepath.Join(s.sandboxDir(m.ID), "meta.json"), m)
}

// saveContainer writes the meta.json of a container no other goroutine knows yet.
func (s *Server) saveContainer(m containerMeta) error {
	return writeJSON(filepath.Join(s.containerDir(m.ID), "meta.json"), m)
}

// persistContainer writes c's meta.json as the record is now; the caller does not hold s.mu.
// Writes of one container are serialised, so the file never goes back to an older record.
func (s *Server) persistContainer(c *container) error {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	s.mu.Lock()
	m := c.meta
	s.mu.Unlock()
	return s.saveContainer(m)
}

// load reads every meta.json, reconciles the containers with the low-level runtime and
// removes the writable layers of containers that have no directory (removeOrphanWritables).
func (s *Server) load(ctx context.Context) error {
	sbs, err := os.ReadDir(s.sandboxesDir())
	if err != nil {
		return fmt.Errorf("cri: read sandboxes: %w", err)
	}
	for _, e := range sbs {
		if !e.IsDir() {
			continue
		}
		var m sandboxMeta
		if err := readJSON(filepath.Join(s.sandboxDir(e.Name()), "meta.json"), &m); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				// A RunPodSandbox or a removal that crashed half-way: finish removing it.
				s.removeSandboxLeftover(ctx, e.Name())
				continue
			}
			s.log.Warn("skipping sandbox without a readable meta.json", "id", e.Name(), "err", err)
			continue
		}
		cfg := &runtimeapi.PodSandboxConfig{}
		if err := protojson.Unmarshal(m.Config, cfg); err != nil {
			s.log.Warn("skipping sandbox with an unreadable config", "id", m.ID, "err", err)
			continue
		}
		s.sandboxes[m.ID] = &sandbox{meta: m, cfg: cfg}
	}
	ctrs, err := os.ReadDir(s.containersDir())
	if err != nil {
		return fmt.Errorf("cri: read containers: %w", err)
	}
	for _, e := range ctrs {
		if !e.IsDir() {
			continue
		}
		var m containerMeta
		if err := readJSON(filepath.Join(s.containerDir(e.Name()), "meta.json"), &m); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				// A create or a removal that crashed half-way: finish removing it.
				s.removeLeftover(ctx, e.Name())
				continue
			}
			s.log.Warn("skipping container without a readable meta.json", "id", e.Name(), "err", err)
			continue
		}
		cfg := &runtimeapi.ContainerConfig{}
		if err := protojson.Unmarshal(m.Config, cfg); err != nil {
			s.log.Warn("skipping container with an unreadable config", "id", m.ID, "err", err)
			continue
		}
		c := &container{meta: m, cfg: cfg}
		s.ctrs[m.ID] = c
		if m.Final == nil && !m.Started {
			// CREATED, unknown to the low-level runtime until StartContainer creates it. An
			// older kubette created it there in CreateContainer: delete what it made (the
			// container stays CREATED and startable).
			if err := s.cfg.Containers.Delete(ctx, m.ID); err != nil {
				s.log.Warn("cannot delete a created container's low-level state", "id", m.ID, "err", err)
			}
			continue
		}
		if m.Final == nil {
			// Reconcile now: a container that stopped while no server ran becomes EXITED;
			// one the low-level runtime does not know at all is gone for good.
			if o := s.refresh(ctx, c); o.state == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
				now := time.Now().UnixNano()
				s.setFinal(c, &finalStatus{ExitCode: 255, FinishedAt: now, Reason: "Unknown",
					Message: "the runtime lost the container while kubette was down: " + o.message})
			}
		}
	}
	return s.removeOrphanWritables()
}

// removeOrphanWritables removes every writable layer (writable/<id>/) whose container has no
// directory: the containers' directories live on a tmpfs, which a reboot empties while the
// writable layers on disk stay, and a crash between the removal of a container's directory
// and of its writable layer leaves one too. A container directory whose meta.json cannot be
// read keeps its writable layer.
func (s *Server) removeOrphanWritables() error {
	ws, err := os.ReadDir(s.writablesDir())
	if err != nil {
		return fmt.Errorf("cri: read writable layers: %w", err)
	}
	removed := 0
	for _, e := range ws {
		if _, err := os.Lstat(s.containerDir(e.Name())); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := os.RemoveAll(s.writableDir(e.Name())); err != nil {
			s.log.Warn("cannot remove the writable layer of a container that is gone", "id", e.Name(), "err", err)
			continue
		}
		removed++
	}
	if removed > 0 {
		s.log.Info("removed the writable layers of containers that are gone (after a reboot, their directories with them)", "count", removed)
	}
	return nil
}

// readJSON decodes the file at path into v.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return errors.New("empty file")
	}
	return json.Unmarshal(b, v)
}

// marshalConfig encodes a CRI message for meta.json.
func marshalConfig(m proto.Message) (json.RawMessage, error) {
	return protojson.Marshal(m)
}

// removeLeftover removes what a crashed CreateContainer or RemoveContainer left of a
// container that has no meta.json: the low-level container, the rootfs mount, the directory
// and the writable layer.
func (s *Server) removeLeftover(ctx context.Context, id string) {
	dir := s.containerDir(id)
	err := errors.Join(s.cfg.Containers.Delete(ctx, id), s.cfg.Images.Unmount(dir))
	if err == nil {
		err = errors.Join(os.RemoveAll(dir), os.RemoveAll(s.writableDir(id)))
	}
	if err != nil {
		s.log.Warn("cannot remove the leftovers of a container", "id", id, "err", err)
		return
	}
	s.log.Info("removed the leftovers of a container", "id", id)
}

// removeSandboxLeftover removes what a crashed RunPodSandbox or RemovePodSandbox left of a
// sandbox that has no meta.json: its network and its directory.
func (s *Server) removeSandboxLeftover(ctx context.Context, id string) {
	err := s.cfg.Network.Teardown(ctx, id)
	if err == nil {
		err = os.RemoveAll(s.sandboxDir(id))
	}
	if err != nil {
		s.log.Warn("cannot remove the leftovers of a pod sandbox", "id", id, "err", err)
		return
	}
	s.log.Info("removed the leftovers of a pod sandbox", "id", id)
}
