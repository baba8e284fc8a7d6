// Package imagelocality is the ImageLocality score plugin, as upstream: it favours
// nodes that already hold the pod's container images, weighting each image by its
// size and by how widely it has spread (so one node holding a popular image does
// not attract every pod).
package imagelocality

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// Name is the plugin's registered name.
const Name = "ImageLocality"

// The thresholds bound the summed image score: below minThreshold a node scores 0,
// at maxContainerThreshold per container it scores MaxNodeScore. They match the
// usual range of compressed image sizes, as upstream.
const (
	mb                    int64 = 1024 * 1024
	minThreshold          int64 = 23 * mb
	maxContainerThreshold int64 = 1000 * mb
)

// preScoreStateKey is where PreScore leaves the pod's image names.
const preScoreStateKey framework.StateKey = "PreScore" + Name

// ImageLocality scores nodes by the images they already have.
type ImageLocality struct {
	handle framework.Handle
}

var (
	_ framework.PreScorePlugin = (*ImageLocality)(nil)
	_ framework.ScorePlugin    = (*ImageLocality)(nil)
)

// New returns the plugin; it takes no arguments (args is ignored) and needs a
// handle with a snapshot lister (for the total number of nodes).
func New(_ context.Context, _ any, h framework.Handle) (framework.Plugin, error) {
	if h == nil {
		return nil, errors.New("ImageLocality needs a framework handle")
	}
	return &ImageLocality{handle: h}, nil
}

// Name returns Name.
func (pl *ImageLocality) Name() string { return Name }

// preScoreState is computed once per pod: the names each container's image may
// be listed under on a node, and the number of nodes in the snapshot.
type preScoreState struct {
	images        [][]string
	numContainers int
	totalNumNodes int
}

// Clone returns the state itself: it is read-only.
func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore normalises the pod's image names and counts the nodes once, so Score
// does no string work per node. (Upstream does this inside Score; the result is
// the same.)
func (pl *ImageLocality) PreScore(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _ []*framework.NodeInfo) *framework.Status {
	s, err := pl.newPreScoreState(pod)
	if err != nil {
		return framework.AsStatus(err)
	}
	state.Write(preScoreStateKey, s)
	return nil
}

func (pl *ImageLocality) newPreScoreState(pod *corev1.Pod) (*preScoreState, error) {
	lister := pl.handle.SnapshotSharedLister()
	if lister == nil {
		return nil, errors.New("ImageLocality: no snapshot lister")
	}
	nodes, err := lister.NodeInfos().List()
	if err != nil {
		return nil, fmt.Errorf("listing nodes from the snapshot: %w", err)
	}
	s := &preScoreState{
		numContainers: len(pod.Spec.InitContainers) + len(pod.Spec.Containers),
		totalNumNodes: len(nodes),
	}
	s.images = make([][]string, 0, s.numContainers)
	for i := range pod.Spec.InitContainers {
		s.images = append(s.images, imageKeys(pod.Spec.InitContainers[i].Image))
	}
	for i := range pod.Spec.Containers {
		s.images = append(s.images, imageKeys(pod.Spec.Containers[i].Image))
	}
	return s, nil
}

// Score sums, over the pod's containers (init and app), the size of each image the
// node has, scaled by the fraction of nodes that have it; the sum is clamped to
// [23 MiB, 1000 MiB × containers] and mapped linearly to [0, MaxNodeScore].
func (pl *ImageLocality) Score(_ context.Context, state *framework.CycleState, pod *corev1.Pod, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	var s *preScoreState
	if c, err := state.Read(preScoreStateKey); err == nil {
		var ok bool
		if s, ok = c.(*preScoreState); !ok {
			return 0, framework.AsStatus(fmt.Errorf("invalid PreScore state, got type %T", c))
		}
	} else {
		var err error
		if s, err = pl.newPreScoreState(pod); err != nil {
			return 0, framework.AsStatus(err)
		}
	}
	return calculatePriority(sumImageScores(nodeInfo, s), s.numContainers), nil
}

// ScoreExtensions returns nil: scores are already in [0, MaxNodeScore].
func (pl *ImageLocality) ScoreExtensions() framework.ScoreExtensions { return nil }

// sumImageScores adds the scaled score of every container image present on the node.
func sumImageScores(nodeInfo *framework.NodeInfo, s *preScoreState) int64 {
	if len(nodeInfo.ImageStates) == 0 {
		return 0
	}
	var sum int64
	for _, keys := range s.images {
		for _, key := range keys {
			if st, ok := nodeInfo.ImageStates[key]; ok {
				sum += scaledImageScore(st, s.totalNumNodes)
				break
			}
		}
	}
	return sum
}

// scaledImageScore is the image size times the fraction of nodes that hold it.
func scaledImageScore(st *framework.ImageStateSummary, totalNumNodes int) int64 {
	if totalNumNodes <= 0 {
		return 0
	}
	spread := float64(st.NumNodes) / float64(totalNumNodes)
	return int64(float64(st.Size) * spread)
}

// calculatePriority clamps sumScores to [minThreshold, maxThreshold] and scales it
// to [0, MaxNodeScore].
func calculatePriority(sumScores int64, numContainers int) int64 {
	maxThreshold := maxContainerThreshold * int64(numContainers)
	if maxThreshold <= minThreshold {
		return 0
	}
	sumScores = min(max(sumScores, minThreshold), maxThreshold)
	return framework.MaxNodeScore * (sumScores - minThreshold) / (maxThreshold - minThreshold)
}

// normalizedImageName is upstream's: it appends ":latest" to a reference without a
// tag or digest ("root" -> "root:latest", "gcr.io:5000/root" ->
// "gcr.io:5000/root:latest") and leaves the rest alone.
func normalizedImageName(name string) string {
	if strings.LastIndex(name, ":") <= strings.LastIndex(name, "/") {
		name += ":latest"
	}
	return name
}

// imageKeys returns the names under which a node may list the image, most
// specific first: upstream's normalizedImageName, then the fully qualified Docker
// Hub form ("nginx" -> "docker.io/library/nginx:latest", which is what containerd
// reports) and the familiar short form ("docker.io/library/nginx:1.25" ->
// "nginx:1.25", which the Docker runtime reports). Upstream only tries the first;
// the others close the gap its TODO describes.
func imageKeys(image string) []string {
	keys := []string{normalizedImageName(image)}
	full, familiar := dockerHubForms(image)
	for _, k := range []string{full, familiar} {
		if k != "" && !contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// dockerHubForms returns the fully qualified and the familiar form of a Docker Hub
// image reference (both with ":latest" added when there is no tag or digest), or
// empty strings when the image is on another registry.
func dockerHubForms(image string) (full, familiar string) {
	name, digest := image, ""
	if i := strings.IndexByte(image, '@'); i >= 0 {
		name, digest = image[:i], image[i:]
	}
	tag := ""
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name, tag = name[:i], name[i:]
	}
	if tag == "" && digest == "" {
		tag = ":latest"
	}
	if name == "" {
		return "", ""
	}
	domain, path := "docker.io", name
	if i := strings.IndexByte(name, '/'); i >= 0 {
		first := name[:i]
		if strings.ContainsAny(first, ".:") || first == "localhost" || strings.ToLower(first) != first {
			domain, path = first, name[i+1:]
		}
	}
	if domain == "index.docker.io" {
		domain = "docker.io"
	}
	if domain != "docker.io" {
		return "", ""
	}
	if !strings.Contains(path, "/") {
		path = "library/" + path
	}
	short := strings.TrimPrefix(path, "library/")
	if strings.Contains(short, "/") && strings.HasPrefix(path, "library/") {
		short = path // library/a/b stays as it is
	}
	return "docker.io/" + path + tag + digest, short + tag + digest
}
