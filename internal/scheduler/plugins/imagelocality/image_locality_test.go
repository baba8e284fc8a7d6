package imagelocality

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// fakeLister is a snapshot over fixed NodeInfos.
type fakeLister []*framework.NodeInfo

func (l fakeLister) NodeInfos() framework.NodeInfoLister                      { return l }
func (l fakeLister) List() ([]*framework.NodeInfo, error)                     { return l, nil }
func (l fakeLister) HavePodsWithAffinityList() ([]*framework.NodeInfo, error) { return nil, nil }
func (l fakeLister) HavePodsWithRequiredAntiAffinityList() ([]*framework.NodeInfo, error) {
	return nil, nil
}
func (l fakeLister) Get(name string) (*framework.NodeInfo, error) {
	for _, ni := range l {
		if ni.Node().Name == name {
			return ni, nil
		}
	}
	return nil, errors.New("not found")
}

// fakeHandle serves the snapshot only.
type fakeHandle struct {
	framework.Handle // nil: the methods the plugin never calls
	lister           framework.SharedLister
}

func (h fakeHandle) SnapshotSharedLister() framework.SharedLister           { return h.lister }
func (h fakeHandle) ClientSet() kubernetes.Interface                        { return nil }
func (h fakeHandle) SharedInformerFactory() informers.SharedInformerFactory { return nil }

// newSnapshot builds NodeInfos with ImageStates as upstream's snapshot does: every
// name of every image on a node is a key, and NumNodes counts the nodes listing it.
func newSnapshot(nodes []*corev1.Node) fakeLister {
	holders := map[string]map[string]bool{}
	for _, n := range nodes {
		for _, img := range n.Status.Images {
			for _, name := range img.Names {
				if holders[name] == nil {
					holders[name] = map[string]bool{}
				}
				holders[name][n.Name] = true
			}
		}
	}
	var out fakeLister
	for _, n := range nodes {
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		for _, img := range n.Status.Images {
			for _, name := range img.Names {
				if ni.ImageStates == nil {
					ni.ImageStates = map[string]*framework.ImageStateSummary{}
				}
				ni.ImageStates[name] = &framework.ImageStateSummary{Size: img.SizeBytes, NumNodes: len(holders[name])}
			}
		}
		out = append(out, ni)
	}
	return out
}

func makeImageNode(name string, status corev1.NodeStatus) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: status}
}

func images(list ...any) corev1.NodeStatus {
	var st corev1.NodeStatus
	for i := 0; i < len(list); i += 2 {
		st.Images = append(st.Images, corev1.ContainerImage{Names: list[i].([]string), SizeBytes: list[i+1].(int64)})
	}
	return st
}

func podSpec(imgs ...string) corev1.PodSpec {
	var spec corev1.PodSpec
	for _, img := range imgs {
		spec.Containers = append(spec.Containers, corev1.Container{Image: img})
	}
	return spec
}

// The cases up to "include InitContainers" are upstream's TestImageLocalityPriority table.
func TestScore(t *testing.T) {
	test30Init300 := podSpec("gcr.io/30")
	test30Init300.InitContainers = []corev1.Container{{Image: "gcr.io/300"}}

	node403002000 := images([]string{"gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"}, 40*mb,
		[]string{"gcr.io/300:latest", "gcr.io/300:v1"}, 300*mb,
		[]string{"gcr.io/2000:latest"}, 2000*mb)
	node25010 := images([]string{"gcr.io/250:latest"}, 250*mb, []string{"gcr.io/10:latest", "gcr.io/10:v1"}, 10*mb)
	node60040900 := images([]string{"gcr.io/600:latest"}, 600*mb, []string{"gcr.io/40:latest"}, 40*mb, []string{"gcr.io/900:latest"}, 900*mb)
	node300600900 := images([]string{"gcr.io/300:latest"}, 300*mb, []string{"gcr.io/600:latest"}, 600*mb, []string{"gcr.io/900:latest"}, 900*mb)
	node400030 := images([]string{"gcr.io/4000:latest"}, 4000*mb, []string{"gcr.io/30:latest"}, 30*mb)
	node203040 := images([]string{"gcr.io/20:latest"}, 20*mb, []string{"gcr.io/30:latest"}, 30*mb, []string{"gcr.io/40:latest"}, 40*mb)
	nodeWithNoImages := corev1.NodeStatus{}
	containerd := images([]string{"docker.io/library/nginx:latest", "docker.io/library/nginx@sha256:abc"}, 1200*mb)
	docker := images([]string{"busybox:1.36"}, 600*mb)

	tests := []struct {
		name   string
		pod    corev1.PodSpec
		nodes  []*corev1.Node
		expect []framework.NodeScore
	}{
		{
			// node2: 100 * (250M/2 - 23M)/(1000M * 2 - 23M) = 5
			name:   "two images spread on two nodes, prefer the larger image one",
			pod:    podSpec("gcr.io/40", "gcr.io/250"),
			nodes:  []*corev1.Node{makeImageNode("node1", node403002000), makeImageNode("node2", node25010)},
			expect: []framework.NodeScore{{Name: "node1", Score: 0}, {Name: "node2", Score: 5}},
		},
		{
			// node1: 100 * ((40M + 300M)/2 - 23M)/(1000M * 2 - 23M) = 7
			name:   "two images on one node, prefer this node",
			pod:    podSpec("gcr.io/40", "gcr.io/300"),
			nodes:  []*corev1.Node{makeImageNode("node1", node403002000), makeImageNode("node2", node25010)},
			expect: []framework.NodeScore{{Name: "node1", Score: 7}, {Name: "node2", Score: 0}},
		},
		{
			name:   "if exceed limit, use limit",
			pod:    podSpec("gcr.io/10", "gcr.io/4000"),
			nodes:  []*corev1.Node{makeImageNode("node1", node400030), makeImageNode("node2", node25010)},
			expect: []framework.NodeScore{{Name: "node1", Score: framework.MaxNodeScore}, {Name: "node2", Score: 0}},
		},
		{
			// node1: 100 * (4000M/3 - 23M)/(1000M * 2 - 23M) = 66
			name:   "if exceed limit, use limit (with node which has no images present)",
			pod:    podSpec("gcr.io/10", "gcr.io/4000"),
			nodes:  []*corev1.Node{makeImageNode("node1", node400030), makeImageNode("node2", node25010), makeImageNode("node3", nodeWithNoImages)},
			expect: []framework.NodeScore{{Name: "node1", Score: 66}, {Name: "node2", Score: 0}, {Name: "node3", Score: 0}},
		},
		{
			name:   "pod with multiple large images, node2 is preferred",
			pod:    podSpec("gcr.io/300", "gcr.io/600", "gcr.io/900"),
			nodes:  []*corev1.Node{makeImageNode("node1", node60040900), makeImageNode("node2", node300600900), makeImageNode("node3", nodeWithNoImages)},
			expect: []framework.NodeScore{{Name: "node1", Score: 32}, {Name: "node2", Score: 36}, {Name: "node3", Score: 0}},
		},
		{
			name:   "pod with multiple small images",
			pod:    podSpec("gcr.io/30", "gcr.io/40"),
			nodes:  []*corev1.Node{makeImageNode("node1", node203040), makeImageNode("node2", node400030)},
			expect: []framework.NodeScore{{Name: "node1", Score: 1}, {Name: "node2", Score: 0}},
		},
		{
			name:   "include InitContainers: two images spread on two nodes, prefer the larger image one",
			pod:    test30Init300,
			nodes:  []*corev1.Node{makeImageNode("node1", node403002000), makeImageNode("node2", node203040)},
			expect: []framework.NodeScore{{Name: "node1", Score: 6}, {Name: "node2", Score: 0}},
		},
		// Beyond upstream: Docker Hub names as containerd and Docker report them.
		{
			// node1: 100 * (1200M/2 - 23M)/(1000M - 23M) = 59
			name:   "short name matches the fully qualified docker.io/library name",
			pod:    podSpec("nginx"),
			nodes:  []*corev1.Node{makeImageNode("node1", containerd), makeImageNode("node2", nodeWithNoImages)},
			expect: []framework.NodeScore{{Name: "node1", Score: 59}, {Name: "node2", Score: 0}},
		},
		{
			// node1: 100 * (600M/2 - 23M)/(1000M - 23M) = 28
			name:   "fully qualified name matches the familiar name",
			pod:    podSpec("docker.io/library/busybox:1.36"),
			nodes:  []*corev1.Node{makeImageNode("node1", docker), makeImageNode("node2", nodeWithNoImages)},
			expect: []framework.NodeScore{{Name: "node1", Score: 28}, {Name: "node2", Score: 0}},
		},
	}
	ctx := context.Background()
	for _, tc := range tests {
		for _, runPreScore := range []bool{true, false} {
			name := tc.name + "/without PreScore"
			if runPreScore {
				name = tc.name + "/with PreScore"
			}
			t.Run(name, func(t *testing.T) {
				snapshot := newSnapshot(tc.nodes)
				p, err := New(ctx, nil, fakeHandle{lister: snapshot})
				if err != nil {
					t.Fatal(err)
				}
				pl := p.(*ImageLocality)
				pod := &corev1.Pod{Spec: tc.pod}
				state := framework.NewCycleState()
				if runPreScore {
					if st := pl.PreScore(ctx, state, pod, snapshot); !st.IsSuccess() {
						t.Fatalf("PreScore: %s", st.Message())
					}
				}
				var got []framework.NodeScore
				for _, ni := range snapshot {
					score, st := pl.Score(ctx, state, pod, ni)
					if !st.IsSuccess() {
						t.Fatalf("Score: %s", st.Message())
					}
					got = append(got, framework.NodeScore{Name: ni.Node().Name, Score: score})
				}
				if !reflect.DeepEqual(got, tc.expect) {
					t.Fatalf("scores = %v, want %v", got, tc.expect)
				}
			})
		}
	}
}

func getImageFakeDigest(content string) string {
	hash := sha256.Sum256([]byte(content))
	return "sha256:" + hex.EncodeToString(hash[:])
}

// Upstream's TestNormalizedImageName.
func TestNormalizedImageName(t *testing.T) {
	for _, tc := range []struct{ in, out string }{
		{"root", "root:latest"},
		{"gcr.io:5000/root", "gcr.io:5000/root:latest"},
		{"root:tag", "root:tag"},
		{"root@" + getImageFakeDigest("root"), "root@" + getImageFakeDigest("root")},
	} {
		if got := normalizedImageName(tc.in); got != tc.out {
			t.Errorf("normalizedImageName(%q) = %q, want %q", tc.in, got, tc.out)
		}
	}
}

func TestImageKeys(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"nginx", []string{"nginx:latest", "docker.io/library/nginx:latest"}},
		{"nginx:1.25", []string{"nginx:1.25", "docker.io/library/nginx:1.25"}},
		{"docker.io/library/nginx:1.25", []string{"docker.io/library/nginx:1.25", "nginx:1.25"}},
		{"index.docker.io/library/nginx", []string{"index.docker.io/library/nginx:latest", "docker.io/library/nginx:latest", "nginx:latest"}},
		{"bitnami/redis", []string{"bitnami/redis:latest", "docker.io/bitnami/redis:latest"}},
		{"docker.io/bitnami/redis:7", []string{"docker.io/bitnami/redis:7", "bitnami/redis:7"}},
		{"nginx@sha256:abc", []string{"nginx@sha256:abc", "docker.io/library/nginx@sha256:abc"}},
		{"gcr.io/pause:3.9", []string{"gcr.io/pause:3.9"}},
		{"localhost:5000/app", []string{"localhost:5000/app:latest"}},
		{"localhost/app", []string{"localhost/app:latest"}},
	} {
		if got := imageKeys(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("imageKeys(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestNewNeedsHandle(t *testing.T) {
	if _, err := New(context.Background(), nil, nil); err == nil {
		t.Fatal("New without a handle succeeded")
	}
}
